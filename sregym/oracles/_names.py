"""Matching the names an agent writes (``deploy/geo``, ``geo-7d9f8c6b5-x2x9q``, ``Geo``) to the
component names a ground truth uses. Shared by the structured grader, evidence coverage and the
wrong-remediation check, so all three agree on what "the same component" means."""

from __future__ import annotations

import re

KIND_WORDS = frozenset(
    "deployment deployments deploy statefulset statefulsets sts daemonset daemonsets ds pod pods po service services "
    "svc configmap configmaps cm secret secrets persistentvolumeclaim persistentvolumeclaims pvc node nodes no "
    "replicaset replicasets rs job jobs cronjob cronjobs networkpolicy networkpolicies netpol resourcequota "
    "resourcequotas quota endpoints ep ingress ingresses serviceaccount serviceaccounts sa hpa "
    "horizontalpodautoscaler role rolebinding namespace namespaces ns".split())
_KIND_PREFIX = re.compile(r"^([a-z]+)(\.[a-z0-9.]+)?[/:]\s*")
# A pod or ReplicaSet name is the workload name plus generated suffixes (StatefulSet pods: -N).
# Kubernetes draws those suffixes from an alphabet without vowels, so ``geo-cache`` is not a pod
# of ``geo`` while ``geo-7d9f8c6b5-x2x9q`` is.
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_GENERATED_SUFFIX = re.compile(rf"^(-{_SAFE}{{6,10}})?(-{_SAFE}{{5}})?$|^-\d+$")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9._/-]*")


def normalise(text: str) -> str:
    """Lower case, no kind prefix (``deployment/geo`` -> ``geo``), runs of ``_``/space as ``-``."""
    t = text.strip().lower().strip("`'\". ")
    m = _KIND_PREFIX.match(t)
    if m and m.group(1) in KIND_WORDS:
        t = t[m.end():]
    return re.sub(r"[\s_]+", "-", t)


def same_component(submitted: str, truth: str) -> bool:
    """Equal after normalisation, or the submitted name is a pod/ReplicaSet of the component."""
    s, t = normalise(submitted), normalise(truth)
    if not s or not t:
        return False
    if s == t:
        return True
    return s.startswith(t + "-") and bool(_GENERATED_SUFFIX.match(s[len(t):]))


def tokens(text: str) -> list[str]:
    """Name-like tokens of free text (a PromQL query, a kubectl command line, a log query)."""
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        out.append(tok)
        out.extend(p for p in re.split(r"[/.]", tok) if p and p != tok)
    return out


def mentions(text: str, component: str) -> bool:
    """Whether ``text`` names ``component`` (or one of its pods) as a whole token."""
    return any(same_component(tok, component) for tok in tokens(text))


def related(name: str, component: str) -> bool:
    """Lenient: ``name`` is the component, one of its pods, or an object named after it
    (``geo-config``, ``hotel-geo``): the component's dash-separated words appear in order."""
    n, c = normalise(name).split("-"), normalise(component).split("-")
    if not c or not c[0]:
        return False
    return any(n[i:i + len(c)] == c for i in range(len(n) - len(c) + 1))
