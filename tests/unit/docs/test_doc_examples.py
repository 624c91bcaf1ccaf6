"""The code the docs show a researcher is run against the kit: every fenced block marked
```` ```python test ```` in docs/ is executed as a module (its decorators register into the real
registries, restored afterwards), and the documented primitive, oracles and agent are then used
the way the engine uses them (with a fake Kubernetes client: pure logic, no cluster)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from sregym.agentplane.agents import AGENTS
from sregym.conductor.faultplane import FaultPlane, build_injector
from sregym.conductor.journal import Journal, RunHeader, read_journal
from sregym.core.problem import GroundTruth, Selector
from sregym.core.trajectory import Submission
from sregym.injectors import INJECTORS
from sregym.oracles import DIAGNOSIS_ORACLES, MITIGATION_ORACLES, JudgeConfig, MitigationContext

DOCS = Path(__file__).resolve().parents[3] / "docs"
# the docs whose examples are run, and how many each shows at least (a block that loses its
# marker would otherwise silently stop being tested)
EXPECTED = {"adding-a-problem.md": 2, "grading.md": 2, "agents.md": 1}
BLOCK = re.compile(r"^```python test\n(.*?)^```", re.MULTILINE | re.DOTALL)
REGISTRIES = (INJECTORS, MITIGATION_ORACLES, DIAGNOSIS_ORACLES, AGENTS)


def blocks(doc: str) -> list[tuple[int, str]]:
    text = (DOCS / doc).read_text()
    return [(text[:m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.fixture()
def registries():
    """The plug-in registries with only what the package registers, restored after the test: the
    docs' examples register names such as ``replica_cap``, which must not leak into other tests,
    and other tests load the same example from a ``--plugins`` folder (``sregym_plugin_*``)."""
    for r in REGISTRIES:
        r.load()
    saved = [(dict(r._items), dict(r._origins)) for r in REGISTRIES]
    for r in REGISTRIES:
        foreign = [n for n, origin in r._origins.items() if origin.startswith(("sregym_plugin_", "sregym_doc_example_"))]
        for n in foreign:
            del r._items[n], r._origins[n]
    yield
    for r, (items, origins) in zip(REGISTRIES, saved):
        r._items, r._origins = items, origins


def run_examples(doc: str) -> dict[str, type]:
    """Execute each marked block of ``doc`` as its own module; return what they registered."""
    before = [set(r._items) for r in REGISTRIES]
    for line, code in blocks(doc):
        name = f"sregym_doc_example_{doc.replace('-', '_').removesuffix('.md')}_{line}"
        module = types.ModuleType(name)
        sys.modules[name] = module  # pydantic resolves the models' annotations through it
        exec(compile(code, f"docs/{doc}:{line}", "exec"), module.__dict__)
    added = {}
    for r, names in zip(REGISTRIES, before):
        for n in set(r._items) - names:
            added[n] = r._items[n]
            assert r._items[n].name == n  # the decorator named the class after its registration
    return added


@pytest.mark.parametrize("doc", sorted(EXPECTED))
def test_every_marked_example_runs_and_registers_with_its_kinds_decorator(doc: str, registries):
    found = blocks(doc)
    assert len(found) >= EXPECTED[doc], f"docs/{doc}: {len(found)} ```python test blocks"
    assert len(run_examples(doc)) >= len(found)


class FakeApps:
    """The slice of the Kubernetes apps API the examples use, over Deployments held in memory."""

    def __init__(self, **replicas: int):
        self.deployments = {name: SimpleNamespace(metadata=SimpleNamespace(name=name),
                                                  spec=SimpleNamespace(replicas=n),
                                                  status=SimpleNamespace(replicas=n, ready_replicas=n))
                            for name, n in replicas.items()}

    def read_namespaced_deployment(self, name, namespace):
        return self.deployments[name]

    def list_namespaced_deployment(self, namespace):
        return SimpleNamespace(items=list(self.deployments.values()))

    def patch_namespaced_deployment_scale(self, name, namespace, body):
        d = self.deployments[name]
        d.spec.replicas = d.status.replicas = d.status.ready_replicas = body["spec"]["replicas"]


def test_the_documented_primitive_runs_through_the_fault_plane_and_cleanup(registries, tmp_path: Path):
    added = run_examples("adding-a-problem.md")
    kube = SimpleNamespace(apps=FakeApps(checkout=3))
    journal = Journal("doc1", tmp_path)
    journal.start(RunHeader(run_id="doc1", problem_id="checkout_capacity_cut"))
    plane = FaultPlane(journal=journal, kube=kube, app_namespace="shop", run_id="doc1", run_seed=1,
                       capabilities=lambda node: {}, reapply=False)

    async def go():
        await plane.start(key="cut", kind="fault", injector="replica_cap", params={"replicas": 1},
                          target=Selector(kind="Deployment", name="checkout"))
        assert (await plane.verify("cut", timeout=0)).ok

    anyio.run(go)
    assert kube.apps.deployments["checkout"].spec.replicas == 1
    [intent] = read_journal(journal.path).open_intents  # the run "crashed" here
    assert intent.state == {"name": "checkout", "namespace": "shop", "original": 3}
    inj = build_injector(intent, kube)  # what `sregym cleanup` does
    inj.recover(inj.load_state(intent.state))
    inj.recover(inj.load_state(intent.state))  # idempotent
    assert kube.apps.deployments["checkout"].spec.replicas == 3
    assert isinstance(inj.load_state(intent.state), added["replica_cap"].State)


def test_the_documented_oracles_judge_the_fake_world(registries):
    run_examples("adding-a-problem.md")
    run_examples("grading.md")
    kube = SimpleNamespace(apps=FakeApps(checkout=3))
    ctx = MitigationContext(kube=kube, namespace="shop", window_seconds=0)
    for name, params in (("replicas_back", {}), ("deployment_ready", {"deployment": "checkout"})):
        cls = MITIGATION_ORACLES.get(name)
        assert cls(cls.parse_params(params), ctx).check().passed
    kube.apps.deployments["checkout"].status.ready_replicas = 1
    for name, params, says in (("replicas_back", {}, "short of replicas: checkout"),
                               ("deployment_ready", {"deployment": "checkout"}, "1/3 ready")):
        cls = MITIGATION_ORACLES.get(name)
        result = cls(cls.parse_params(params), ctx).check()
        assert not result.passed and result.name == name and says in result.message

    truth = GroundTruth(root_cause="checkout runs one replica for three replicas' load", component="checkout",
                        mechanism="capacity cut")
    judge = DIAGNOSIS_ORACLES.get("names_the_component")
    said = Submission(kind="diagnosis", t=1.0, text="Checkout is short of replicas")
    assert judge(judge.parse_params({})).grade(truth, said, JudgeConfig()).passed
    assert not judge(judge.parse_params({})).grade(truth, None, JudgeConfig()).passed
