"""benchmarks/cell_resources.py: cell pods and app namespaces sampled from the kubelets' summary API."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace as NS

BENCHMARKS = Path(__file__).parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as when run as a script: its folder is on the import path
import cell_resources as cells  # noqa: E402


def pod(ns, name, cores=None, mib=None):
    out = {"podRef": {"namespace": ns, "name": name}}
    if cores is not None:
        out["cpu"] = {"usageNanoCores": int(cores * 1e9)}
        out["memory"] = {"workingSetBytes": int(mib * 2**20)}
    return out


class FakeKube:
    """Two nodes whose summaries change per sample; one cell pod is listed in the cells' namespace."""

    def __init__(self, summaries):
        self.summaries = iter(summaries)
        self.core = NS(list_node=lambda: NS(items=[NS(metadata=NS(name="n1")), NS(metadata=NS(name="n2"))]),
                       list_namespaced_pod=lambda ns, label_selector: NS(
                           items=[NS(metadata=NS(name="suite-cell-a-x"))] if ns == "night"
                           and label_selector == "app.kubernetes.io/component=suite-cell" else []))

    def kubectl(self, *args, check=True):
        return NS(stdout=json.dumps(next(self.summaries)))


def test_cell_pods_and_app_namespaces_are_summarised():
    kube = FakeKube([
        {"pods": [pod("night", "suite-cell-a-x", 0.2, 300), pod("night", "nightly-runner", 0.9, 900),
                  pod("hotel", "geo", 0.1, 50)]},
        {"pods": [pod("hotel", "frontend", 0.3, 70), pod("other", "z", 5, 5000), pod("hotel", "new")]},
        {"pods": [pod("night", "suite-cell-a-x", 0.4, 500)]},
        {"pods": [pod("hotel", "geo", 0.2, 60)]},
    ])
    s = cells.Sampler(kube, "night", ["hotel"])
    s.sample()
    s.sample()
    assert set(s.cells) == {"suite-cell-a-x"}  # the runner's own pod is not a cell
    assert s.cells["suite-cell-a-x"].row() == {"samples": 2, "cpu_mean_m": 300.0, "cpu_p95_m": 390.0,
                                               "cpu_peak_m": 400.0, "mem_peak_mib": 500.0}
    # the namespace's pods of both nodes are summed per sample; a pod without figures yet is skipped
    assert s.namespaces["hotel"].cpu_m == [400.0, 200.0]
    assert s.namespaces["hotel"].mem_mib == [120.0, 60.0]
    report = "\n".join(s.report())
    assert "cell pods (1): CPU mean of means 300m, largest peak 400m; memory largest peak 500 MiB" in report
