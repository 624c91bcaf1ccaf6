"""A container-scoped fault primitive for unit tests: a JSON file stands for the target's pods, each
with its container's id and the rules on that container; a restarted container (same pod, new id)
has none of the old rules, as a process in the container's cgroup or a tracer on it would not."""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sregym.injectors import Injector, Verification, injector


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    rule: str = "stress"


def pods(file: str) -> dict[str, dict]:
    """pod uid -> {"container": its container's id, "rules": [...]}."""
    return json.loads(Path(file).read_text())


def write(file: str, world: dict[str, dict]) -> None:
    tmp = Path(file).with_suffix(".tmp")  # atomic: the watcher thread writes while the test reads
    tmp.write_text(json.dumps(world))
    tmp.replace(file)


@injector("unit_container_rule")
class ContainerRule(Injector[Params]):
    """Adds a rule to one pod's container; the rule dies with the container."""
    Params = Params
    pod_scoped = True

    def dies_with_container(self) -> bool:
        return True

    def plan(self):
        world = pods(self.params.file)
        only = self.ctx.only_pods
        uid = [u for u in sorted(world) if only is None or u in only][0]
        return {"container": {"pod_uid": uid, "container_id": world[uid]["container"]}}

    def inject(self, state):
        world = pods(self.params.file)
        pod = world[state["container"]["pod_uid"]]
        if pod["container"] == state["container"]["container_id"]:
            pod["rules"].append(self.params.rule)
            write(self.params.file, world)

    def verify(self, state):
        pod = pods(self.params.file).get(state["container"]["pod_uid"])
        return Verification(bool(pod) and pod["container"] == state["container"]["container_id"]
                            and self.params.rule in pod["rules"])

    def recover(self, state):
        world = pods(self.params.file)
        pod = world.get(state["container"]["pod_uid"])
        if pod and pod["container"] == state["container"]["container_id"] and self.params.rule in pod["rules"]:
            pod["rules"].remove(self.params.rule)
            write(self.params.file, world)
