"""The attack: "a component restarted by noise is innocent". Were the noise that restarts pods
(a pod restart, a rolling restart) or drops packets (a network blip) never to pick the run's
root-cause component, an agent would strike every component noise touched off its list for free.
Since faults persist as their real causes do (re-applied to new pods, or living in objects and
volumes), such noise may pick the root cause too; only where a restart would cure the fault (the
ground truth's ``restart_cures``, or a paused process) do restarts spare it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import injectors.noise_network_blip as blip_module
import sregym.injectors._noise as noise
from injectors.noise_network_blip import NoiseNetworkBlip
from injectors.noise_pod_restart import NoisePodRestart
from injectors.noise_rolling_restart import NoiseRollingRestart
from sregym.conductor.episode import cured_by_restart, noise_exclusions
from sregym.core.loader import load_problem_file
from sregym.core.problem import Problem, Selector
from sregym.injectors import FaultContext

ROOT = Path(__file__).parents[3]
SEEDS = range(200)


def problem(name: str) -> Problem:
    return load_problem_file(ROOT / "problems" / f"{name}.yaml").problem


def workloads(names: list[str]) -> dict[str, list[dict]]:
    """One Deployment per name with one running pod it owns."""
    deps = [{"kind": "Deployment", "metadata": {"name": n, "namespace": "app", "labels": {"app": n}},
             "spec": {"template": {"metadata": {"labels": {"app": n}}}}} for n in names]
    pods = [{"metadata": {"name": f"{n}-7d9f-x{i}", "namespace": "app", "uid": f"u-{n}", "labels": {"app": n},
                          "ownerReferences": [{"kind": "ReplicaSet", "name": f"{n}-7d9f"}]},
             "status": {"phase": "Running"}} for i, n in enumerate(names)]
    return {"Deployment": deps, "Pod": pods}


def context(p: Problem, seed: int) -> FaultContext:
    """The context the fault plane hands noise in a run of ``p`` (as ``Episode.open_fault_plane`` builds it)."""
    return FaultContext(kube=None, app_namespace="app", hidden_namespace="hidden", seed=seed,
                        exclude=noise_exclusions(p), cured_by_restart=cured_by_restart(p))


def component(name: str) -> str:
    return name.split("-7d9f")[0]


def picks(p: Problem, names: list[str], monkeypatch) -> dict[str, set[str]]:
    """The components each restart or packet-loss noise picks over ``SEEDS``."""
    objs = workloads(names)
    monkeypatch.setattr(noise, "list_objects", lambda kube, kind, ns: objs[kind])
    monkeypatch.setattr(blip_module, "pick_container", lambda ctx, sel: SimpleNamespace(
        pod_uid="u", node="n1", pod=sel.name))
    monkeypatch.setattr(blip_module, "target_pid", lambda ctx, tc: (None, 4242))
    out: dict[str, set[str]] = {"pod restart": set(), "rolling restart": set(), "blip": set()}
    target = Selector(kind="Pod", name="-")
    for seed in SEEDS:
        ctx = context(p, seed)
        out["pod restart"].add(component(NoisePodRestart(NoisePodRestart.Params(), target, ctx, None).plan().pod))
        out["rolling restart"].add(NoiseRollingRestart(NoiseRollingRestart.Params(), target, ctx, None).plan().name)
        out["blip"].add(component(NoiseNetworkBlip(NoiseNetworkBlip.Params(), target, ctx, None).plan().pod))
    return out


HOTEL = ["frontend", "geo", "profile", "rate", "recommendation", "reservation", "search", "user"]


@pytest.mark.parametrize("name, root", [
    ("hotel_geo_cpu_pressure", "geo"),        # a stress fault, re-applied to geo's new pods
    ("hotel_geo_missing_db_password", "geo"),  # a Kubernetes-object fault: the template keeps it
    ("hotel_search_packet_loss", "search"),    # a loss fault in search's netns; a blip's chain is another
])
def test_noise_that_restarts_or_drops_packets_may_pick_the_root_cause(name, root, monkeypatch):
    chosen = picks(problem(name), HOTEL, monkeypatch)
    for noise_kind, components in chosen.items():
        assert root in components, f"{noise_kind} never picks {root}: 'touched by noise' would prove it innocent"


SHOP = ["api", "lb", "shop-db", "shop-queue", "shop-redis", "web", "worker"]


@pytest.mark.parametrize("name, names, spared", [
    ("shop_redis_hang", SHOP, "shop-redis"),                           # restart_cures: a hung redis
    ("hotel_retry_storm_after_db_stall", [*HOTEL, "hotel-db"], "hotel-db"),  # its 20 s stall, cut short
])
def test_restarts_spare_what_a_restart_would_cure_and_blips_do_not(name, names, spared, monkeypatch):
    chosen = picks(problem(name), names, monkeypatch)
    assert spared not in chosen["pod restart"] | chosen["rolling restart"]
    assert spared in chosen["blip"]  # lost packets cure no hang


def test_a_retry_storms_root_cause_may_still_be_restarted(monkeypatch):
    # geo (capped CPU, bad retries in a ConfigMap) keeps its settings in objects; only the stall's target is spared
    chosen = picks(problem("hotel_retry_storm_after_db_stall"), [*HOTEL, "hotel-db"], monkeypatch)
    assert "geo" in chosen["pod restart"] and "geo" in chosen["rolling restart"]
