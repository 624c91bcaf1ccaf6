"""Node leases: when a lease may be taken, and a suite cell that waits for a node another process holds."""

from datetime import datetime, timedelta, timezone

from rich.console import Console
from test_suite_runner import FakeEngine, problem

from sregym.conductor.node_leases import lease_is_free, lease_name
from sregym.conductor.suite import SuiteRunner
from sregym.core.settings import RunSettings

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def spec(holder, renewed_s_ago, duration=120):
    return {"holderIdentity": holder, "renewTime": (NOW - timedelta(seconds=renewed_s_ago)).isoformat(),
            "leaseDurationSeconds": duration}


def test_a_lease_is_free_when_absent_unheld_ours_or_expired():
    assert lease_is_free(None, "me", NOW)
    assert lease_is_free({"holderIdentity": ""}, "me", NOW)
    assert lease_is_free(spec("me", 5), "me", NOW)
    assert lease_is_free(spec("other", 121), "me", NOW)
    assert lease_is_free({"holderIdentity": "other", "renewTime": "2026-11-21T11:00:00.000000Z"}, "me", NOW)


def test_a_lease_someone_renews_is_not_free():
    assert not lease_is_free(spec("other", 5), "me", NOW)
    assert not lease_is_free(spec("other", 100, duration=300), "me", NOW)


def test_lease_names_are_neutral_valid_object_names():
    assert lease_name("worker-1") == "node-worker-1"
    assert lease_name("Node_A") == "node-node-a"


class OtherProcessHolds:
    """Stands in for the Lease API: the node is held by another process for the first tries."""

    def __init__(self, busy_tries: int):
        self.busy_tries, self.tries, self.released = busy_tries, 0, []

    def ensure_namespace(self):
        pass

    def nodes(self):
        return ["n1"]

    def acquire_all(self, nodes, holder):
        self.tries += 1
        if self.tries <= self.busy_tries:
            return None
        outer = self

        class Held:
            def release(self):
                outer.released.append((tuple(nodes), holder))

        return Held()


def test_a_cell_waits_for_a_node_lease_then_runs_and_gives_it_back(tmp_path):
    leases = OtherProcessHolds(busy_tries=3)
    engine = FakeEngine()
    runner = SuiteRunner([problem("n1", injector="disk")], suite="lite", settings=RunSettings(agent="noop"),
                         seeds=[0], noise=[False], out_dir=tmp_path, run_fn=engine, console=Console(file=open("/dev/null", "w")),
                         is_node_level=lambda i: i == "disk", leases=leases, lease_poll_s=0.01)
    assert runner.run().statuses == {"completed": 1}
    assert leases.tries == 4 and len(engine.calls) == 1
    assert leases.released == [(("n1",), leases.released[0][1])]
    assert "noop" in leases.released[0][1]


def test_cells_without_node_faults_take_no_lease(tmp_path):
    leases = OtherProcessHolds(busy_tries=99)
    runner = SuiteRunner([problem("a1")], suite="lite", settings=RunSettings(agent="noop"), seeds=[0], noise=[False],
                         out_dir=tmp_path,
                         run_fn=FakeEngine(), console=Console(file=open("/dev/null", "w")),
                         is_node_level=lambda i: False, leases=leases, lease_poll_s=0.01)
    assert runner.run().statuses == {"completed": 1} and leases.tries == 0
