"""A pod-scoped fault primitive for unit tests: a JSON file stands for the target's pods, each a
list of rules; a pod replaced by a new one (a new uid) loses its rules, as a pod's network
namespace does."""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sregym.injectors import Injector, Verification, injector


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    rule: str = "drop"


def pods(file: str) -> dict[str, list[str]]:
    """pod uid -> its rules."""
    return json.loads(Path(file).read_text())


def write(file: str, world: dict[str, list[str]]) -> None:
    # atomic: the test reads the file from another thread while the fault plane's watcher writes it
    tmp = Path(file).with_suffix(".tmp")
    tmp.write_text(json.dumps(world))
    tmp.replace(file)


@injector("unit_pod_rule")
class PodRule(Injector[Params]):
    """Adds a rule to one pod of the file; the rule dies with the pod."""
    Params = Params
    pod_scoped = True

    def plan(self):
        uids = sorted(pods(self.params.file))
        only = self.ctx.only_pods
        uids = [u for u in uids if only is None or u in only]
        return {"container": {"pod_uid": uids[0]}}

    def inject(self, state):
        world = pods(self.params.file)
        world[state["container"]["pod_uid"]].append(self.params.rule)
        write(self.params.file, world)

    def verify(self, state):
        return Verification(self.params.rule in pods(self.params.file).get(state["container"]["pod_uid"], []))

    def recover(self, state):
        world = pods(self.params.file)
        uid = state["container"]["pod_uid"]
        if uid in world and self.params.rule in world[uid]:
            world[uid].remove(self.params.rule)
            write(self.params.file, world)
