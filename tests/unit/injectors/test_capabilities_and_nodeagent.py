"""Pure logic of capability parsing, node pod manifests and mechanism selection."""

import json
import re
import subprocess
import sys

import pytest

from sregym.cluster import nodeprobe
from sregym.cluster.capabilities import CAPABILITIES, NodeCapabilities
from sregym.cluster.nodeagent import HostRunner, node_pod_manifest, node_pod_name, pids_with_cmdline
from sregym.core.errors import MechanismUnavailable
from sregym.injectors._api import Injector, Mechanism

TELLING = re.compile(r"chaos|fault|inject", re.IGNORECASE)


def test_probe_reports_every_documented_capability_on_this_host():
    out = subprocess.run([sys.executable, nodeprobe.__file__], capture_output=True, text=True, timeout=60)
    raw = json.loads(out.stdout)
    assert set(CAPABILITIES) - {"network_policy_enforcement"} <= set(raw)  # that one is probed from the API
    assert all(isinstance(v["ok"], bool) and v["detail"] for v in raw.values())


def test_capabilities_round_trip_through_json():
    caps = NodeCapabilities.from_probe("n1", {"fuse": {"ok": True, "detail": "/dev/fuse present"},
                                              "netem": {"ok": False, "detail": "unknown qdisc"}})
    again = NodeCapabilities.from_probe("n1", caps.to_json())
    assert again == caps
    assert caps.present == {"fuse": True, "netem": False}


def test_node_pod_is_privileged_pinned_and_neutral():
    m = node_pod_manifest("worker-1", "node-ops")
    assert m["spec"]["nodeName"] == "worker-1"
    assert m["spec"]["hostPID"] and m["spec"]["hostNetwork"]
    assert m["spec"]["containers"][0]["securityContext"]["privileged"]
    assert not TELLING.search(json.dumps(m))
    assert node_pod_name("worker-1") == node_pod_name("worker-1") != node_pod_name("worker-2")
    assert len(node_pod_name("x" * 300)) <= 63


class _Two(Injector):
    mechanisms = (Mechanism("ebpf-override", "", ("bpf_override_return", "bcc_compile")),
                  Mechanism("ptrace", "", ("ptrace",)))

    def inject(self, state): ...

    def verify(self, state): ...

    def recover(self, state): ...


def test_first_supported_mechanism_is_chosen_and_forcing_a_missing_one_refuses():
    caps = {"ptrace": True, "bpf_override_return": False}
    assert _Two.choose_mechanism(caps).name == "ptrace"
    with pytest.raises(MechanismUnavailable, match="bpf_override_return"):
        _Two.choose_mechanism(caps, forced="ebpf-override")


def test_a_token_scan_skips_the_client_that_runs_it(tmp_path):
    """Through the node pod (hostPID) the ``kubectl exec`` client of a scan carries the token in
    its own command line; it must not count as the fault's process."""
    token = f"tok{tmp_path.name}"
    client = tmp_path / "kubectl"
    client.symlink_to("/bin/sh")
    procs = [subprocess.Popen([str(client), "-c", "sleep 30", token]),
             subprocess.Popen(["sh", "-c", "sleep 30", token])]
    try:
        found = [pid for pid, _ in pids_with_cmdline(HostRunner("n1"), token)]
        assert found == [procs[1].pid]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_conductor_in_a_pod_on_the_node_network_is_not_the_node(monkeypatch):
    # issue 20: a suite cell's pod runs in the node's network (jobs.hostNetwork) and so has the node's
    # address; it was taken for the node's host, probed /dev/fuse in its own container and refused
    # latent_sector_error ("fuse-bad-blocks needs fuse"). Node work from a pod goes to the node pod.
    from types import SimpleNamespace as NS

    from sregym.cluster import nodeagent

    node = NS(status=NS(addresses=[NS(address="10.244.0.1")]))
    kube = NS(core=NS(read_node=lambda name: node))
    monkeypatch.setattr(nodeagent, "local_addresses", lambda: {"127.0.0.1", "10.244.0.1"})
    monkeypatch.setattr(nodeagent, "pod_namespace", lambda: None)
    assert nodeagent.node_is_this_host(kube, "vm")
    monkeypatch.setattr(nodeagent, "pod_namespace", lambda: "sregym-nightly")
    assert not nodeagent.node_is_this_host(kube, "vm")
