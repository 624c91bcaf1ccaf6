"""NetworkPolicy semantics: would the policies in force let a source pod reach a target pod's port?

Pure logic over policy objects (as dicts) following the Kubernetes rules: a pod is isolated for
ingress (egress) once any policy selecting it has that policy type; then a connection is allowed
only if some rule of some selecting policy admits the peer and the port. Both the target's
ingress and the source's egress must allow the connection.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Endpoint:
    """One side of a connection: a pod's labels, its namespace and that namespace's labels."""

    labels: dict[str, str]
    namespace: str
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ip: str | None = None
    named_ports: dict[str, int] = field(default_factory=dict)


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Label-selector semantics; an empty selector matches everything."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def policy_types(policy: dict[str, Any]) -> list[str]:
    spec = policy.get("spec", {})
    return spec.get("policyTypes") or (["Ingress"] + (["Egress"] if spec.get("egress") else []))


def peer_matches(peer: dict[str, Any], other: Endpoint, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        if other.ip is None:
            return False
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"], strict=False) and not any(
            ip in ipaddress.ip_network(e, strict=False) for e in block.get("except") or [])
    pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
    if ns_sel is None and other.namespace != policy_namespace:
        return False
    if ns_sel is not None and not selector_matches(ns_sel, other.namespace_labels):
        return False
    return pod_sel is None or selector_matches(pod_sel, other.labels)


def port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str, named: dict[str, int]) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        want = p.get("port")
        if want is None:
            return True
        if isinstance(want, str) and not want.isdigit():
            want = named.get(want)
            if want is None:
                continue
        want = int(want)
        end = int(p.get("endPort") or want)
        if want <= port <= end:
            return True
    return False


def denying_policies(policies: list[dict[str, Any]], source: Endpoint, target: Endpoint, port: int,
                     protocol: str = "TCP") -> list[str]:
    """Names of the policies that isolate the connection without admitting it; empty = allowed."""
    denied: list[str] = []
    for direction, owner, peer, rules_key, peers_key in (("Ingress", target, source, "ingress", "from"),
                                                         ("Egress", source, target, "egress", "to")):
        selecting = [p for p in policies if p["metadata"].get("namespace") == owner.namespace
                     and direction in policy_types(p)
                     and selector_matches(p.get("spec", {}).get("podSelector"), owner.labels)]
        if not selecting:
            continue
        allowed = any(
            (not rule.get(peers_key) or any(peer_matches(x, peer, p["metadata"]["namespace"]) for x in rule[peers_key]))
            and port_matches(rule.get("ports"), port, protocol, target.named_ports)
            for p in selecting for rule in (p.get("spec", {}).get(rules_key) or []))
        if not allowed:
            denied += [f"{direction.lower()}:{p['metadata']['namespace']}/{p['metadata']['name']}" for p in selecting]
    return denied
