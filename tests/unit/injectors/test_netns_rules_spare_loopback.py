"""Loss and DNS faults in a pod's netns leave its loopback alone: a lossy link or an unreachable DNS
server never touches a process talking to itself or to a sidecar over 127.0.0.1 (or to its own
pod IP, which the kernel also routes over lo). Each planned rule excludes the loopback interface
in both hooks: from OUTPUT the in-interface is empty and from INPUT the out-interface, so
``! -i lo ! -o lo`` holds wherever the chain is jumped to from."""

from __future__ import annotations

import pytest

from injectors.dns_failure import DnsFailure
from injectors.noise_network_blip import BlipState, NoiseNetworkBlip
from injectors.packet_loss import PacketLoss
from sregym.injectors import NetnsState

SPARES_LOOPBACK = ("! -i lo ", "! -o lo ")


def spares_loopback(rule: str) -> bool:
    return all(part in rule + " " for part in SPARES_LOOPBACK)


def planned(cls, params: dict) -> list[str]:
    inj = cls.__new__(cls)
    inj.params = cls.Params(**params)
    inj.plan_target = lambda **more: NetnsState(container={"pod": "p"}, pid=1, chain="POD-abc", **more)
    return inj.plan().rules


@pytest.mark.parametrize("direction", ["egress", "ingress", "both"])
@pytest.mark.parametrize("peer", [None, "10.0.0.7/32"])
def test_packet_loss_drops_nothing_on_the_loopback(direction, peer):
    rules = planned(PacketLoss, {"probability": 1.0, "direction": direction, "peer_cidr": peer})
    assert rules and all(spares_loopback(r) and "--probability 1.0 -j DROP" in r for r in rules), rules
    if peer:
        assert sorted(r.split()[:2] for r in rules) == [["-d", peer], ["-s", peer]]


@pytest.mark.parametrize("name", [None, "peer"])
def test_dns_failure_leaves_a_resolver_on_the_loopback_answering(name):
    rules = planned(DnsFailure, {"name": name})
    assert len(rules) == 2 and all(spares_loopback(r) and "--dport 53" in r for r in rules), rules


def test_the_network_blip_noise_drops_nothing_on_the_loopback(monkeypatch):
    import injectors.noise_network_blip as blip

    pod = {"metadata": {"name": "peer-1", "namespace": "app"}}
    monkeypatch.setattr(blip, "candidates", lambda ctx, kind, exclude, **how: [pod])
    monkeypatch.setattr(blip, "running", lambda pods: pods)
    monkeypatch.setattr(blip, "pick_container", lambda ctx, sel: type("TC", (), {"node": "n1", "pod": "peer-1",
                                                                                 "pod_uid": "u1"})())
    monkeypatch.setattr(blip, "target_pid", lambda ctx, tc: (None, 4242))
    inj = NoiseNetworkBlip.__new__(NoiseNetworkBlip)
    inj.params = NoiseNetworkBlip.Params(probability=0.5)
    inj.ctx = type("Ctx", (), {"seed": 3})()
    state = inj.plan()
    assert isinstance(state, BlipState) and state.rules
    assert all(spares_loopback(r) and "--probability 0.5 -j DROP" in r for r in state.rules), state.rules
