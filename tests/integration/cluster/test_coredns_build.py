"""The CoreDNS sregym builds (only the plugins it chose, see binaries.COREDNS_PLUGINS) serves the
cluster's own Corefile: run beside the cluster's CoreDNS on loopback ports, reading the cluster's API
through its kubeconfig, it answers a Service name, refuses names outside the cluster, and a forward to
a dead upstream fails as SERVFAIL rather than hanging or crashing."""

from __future__ import annotations

import random
import re
import socket
import struct
import subprocess
import time

import pytest
import yaml

from sregym.cluster import binaries
from sregym.cluster.local.config import LocalNetwork, coredns_manifests
from polling import eventually

pytestmark = pytest.mark.cluster

NOERROR, SERVFAIL, NXDOMAIN = 0, 2, 3


def _free_port(candidates=(0,)) -> int:
    """A loopback port free for both TCP and UDP (DNS and its forwards use both)."""
    for _ in range(100):
        for wanted in candidates:
            with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    tcp.bind(("127.0.0.1", wanted))
                    udp.bind(("127.0.0.1", tcp.getsockname()[1]))
                except OSError:
                    continue
                return tcp.getsockname()[1]
    raise AssertionError(f"no free loopback port among {candidates}")


def _dead_port() -> int:
    """A free port below the ephemeral range: a forward's own source port can never be it, so the
    forward cannot connect its UDP socket to itself and read back its own query (a FORMERR)."""
    return _free_port(range(900, 1024))


def _query(port: int, name: str, timeout: float = 5.0) -> tuple[int, list[str]]:
    """One A query over UDP to 127.0.0.1:port: (rcode, the A records' addresses)."""
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, ("127.0.0.1", port))
        reply = s.recv(4096)
    got_id, flags, _, answers = struct.unpack(">HHHH", reply[:8])
    assert got_id == ident
    offset = 12 + len(question) + 4
    addresses = []
    for _ in range(answers):
        if reply[offset] & 0xC0 == 0xC0:  # a compressed name: a pointer of two bytes
            offset += 2
        else:
            while reply[offset]:
                offset += reply[offset] + 1
            offset += 1
        rtype, _, _, length = struct.unpack(">HHIH", reply[offset:offset + 10])
        offset += 10
        if rtype == 1:
            addresses.append(socket.inet_ntoa(reply[offset:offset + length]))
        offset += length
    return flags & 0xF, addresses


def _standalone_corefile(corefile: str, kubeconfig: str, context: str | None, port: int) -> str:
    """The cluster's Corefile on loopback ports of our own, reading the API through a kubeconfig (the
    pod reads it in-cluster), plus a zone forwarded to a port where nothing listens."""
    text = re.sub(r"(health|ready|prometheus) :\d+", lambda m: f"{m.group(1)} 127.0.0.1:{_free_port()}", corefile)
    text = re.sub(r":53\b", f":{port}", text)
    text = re.sub(r"(\n\s*kubernetes [^\n{]*\{)", rf"\1\n        kubeconfig {kubeconfig} {context or ''}", text, count=1)
    dead = _dead_port()
    return text + f"\nunreachable.test:{port} {{\n    errors\n    forward . 127.0.0.1:{dead} {{\n" \
                  "        max_fails 1\n        expire 1s\n    }\n}\n"


def _log(tmp_path) -> str:
    return (tmp_path / "Corefile").read_text() + (tmp_path / "coredns.log").read_text()


def test_trimmed_coredns_has_the_chosen_plugins_only():
    binary = binaries.build(binaries.COREDNS) / "coredns"
    listed = subprocess.run([str(binary), "-plugins"], capture_output=True, text=True, timeout=30, check=True).stdout
    names = set(listed.split())
    assert {"kubernetes", "forward", "cache", "template", "rewrite", "hosts", "log", "prometheus"} <= names
    assert not names & {"route53", "azure", "clouddns", "etcd", "nomad", "trace", "dnssec"}


def test_trimmed_coredns_serves_the_clusters_corefile(cluster, tmp_path):
    binary = binaries.build(binaries.COREDNS) / "coredns"
    # the Corefile sregym deploys (not the live ConfigMap, which a running problem may have broken)
    manifests = yaml.safe_load_all(coredns_manifests(LocalNetwork(), "unused"))
    corefile = next(d for d in manifests if d["kind"] == "ConfigMap")["data"]["Corefile"]
    domain = LocalNetwork().cluster_domain
    cluster_ip = cluster.kube.core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    port = _free_port()
    (tmp_path / "Corefile").write_text(_standalone_corefile(corefile, str(cluster.kubeconfig), cluster.context, port))
    log = open(tmp_path / "coredns.log", "w")
    proc = subprocess.Popen([str(binary), "-conf", str(tmp_path / "Corefile")], cwd=tmp_path, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        def answered():
            assert proc.poll() is None, _log(tmp_path)
            try:
                return _query(port, f"kubernetes.default.svc.{domain}", timeout=1)
            except OSError:
                return None

        rcode, addresses = eventually(answered, 60, 0.5, "the standalone CoreDNS answering")
        assert (rcode, addresses) == (NOERROR, [cluster_ip])
        assert _query(port, f"no-such-service.default.svc.{domain}")[0] == NXDOMAIN
        # nothing leaves the host: a name outside the cluster is NXDOMAIN from the template block
        assert _query(port, "example.com")[0] == NXDOMAIN
        started = time.monotonic()
        assert _query(port, "www.unreachable.test", timeout=15)[0] == SERVFAIL, _log(tmp_path)
        assert time.monotonic() - started < 15
        assert proc.poll() is None, _log(tmp_path)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
