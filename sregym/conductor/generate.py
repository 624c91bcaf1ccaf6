"""The space of problems beyond the curated set: every viable (fault primitive, target) pair on our
apps, and a problem-file skeleton for one of them.

Targets come from each app's descriptor (``charts/<app>/sregym.yaml``): its services, data stores,
load generator, the Services in front of them, its settings ConfigMap and credential Secrets. A
pair is viable when the injector acts on that kind of object and, for primitives that need more
than a kind (a password to rotate, a volume with data, a load generator), the target has it.

An emitted skeleton is deliberately not a valid problem: the alert, the ground truth and the
mitigation oracle are left as ``TODO`` values that the schema refuses (too short, empty list), so
``sregym validate --static`` fails, naming the line, until an author has filled them in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sregym.apps.lifecycle import loadgen_name, loadgen_namespace
from sregym.apps.spec import AppSpec, DatastoreSpec, list_apps, load_app
from sregym.conductor.checks import NOISE_PREFIX
from sregym.core.errors import UserInputError
from sregym.injectors import INJECTORS, Injector

TODO = "TODO"


@dataclass(frozen=True)
class Target:
    """One object of an app a fault can act on."""

    app: str
    kind: str
    name: str
    role: str  # service, datastore, loadgen, settings, credentials
    datastore: DatastoreSpec | None = None
    namespace: str | None = None  # where it runs when not in the app's namespace (the load generator)
    depends_on: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()  # PersistentVolumeClaims a service's pods mount

    @property
    def ref(self) -> str:
        """How ``--target`` names it: ``<app>/<Kind>/<name>``."""
        return f"{self.app}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class Candidate:
    """A viable (primitive, target) pair."""

    injector: str
    target: Target
    covered_by: tuple[str, ...] = ()  # ids of curated problems that already use this pair


def app_targets(app: AppSpec) -> list[Target]:
    """Every object of ``app`` that the descriptor names, with what kind of thing it is."""
    out: list[Target] = []
    for s in app.services:
        out.append(Target(app.name, s.kind, s.name, "service", depends_on=tuple(s.depends_on), claims=tuple(s.claims)))
    for d in app.datastores:
        out.append(Target(app.name, d.kind, d.name, "datastore", datastore=d))
        if d.credentials_secret:
            out.append(Target(app.name, "Secret", d.credentials_secret, "credentials", datastore=d))
    if app.workload:  # in the load generators' namespace, one per app namespace
        out.append(Target(app.name, "Deployment", loadgen_name(app, app.namespace), "loadgen",
                          namespace=loadgen_namespace()))
    # our charts put a Service with the component's name in front of each service and data store
    out += [Target(app.name, "Service", t.name, "service", depends_on=t.depends_on)
            for t in out if t.role in ("service", "datastore")]
    if app.settings:
        out.append(Target(app.name, "ConfigMap", app.settings.configmap, "settings"))
    return out


def _persistent(t: Target) -> bool:
    return t.datastore is not None and t.datastore.persistent and t.role == "datastore"


# Primitives that need more than the right kind of object. Everything else must not touch the
# load generator: a broken load generator is not an incident, it is a broken measurement.
_NEEDS: dict[str, Callable[[Target], bool]] = {
    "credential_rotation": lambda t: t.role == "datastore" and t.datastore is not None
    and t.datastore.engine in ("redis", "postgresql") and bool(t.datastore.credentials_secret),
    "latent_sector_error": _persistent,
    "disk_full": _persistent,
    # The SLO load generator is the app's users: a surge is more of them (shop_api_traffic_surge).
    # The SLOs compare per-request quality (success share, p95) with the baseline, which capacity
    # restores at any rate; the generator's namespace is out of the agent's reach, so the surge
    # cannot be "fixed" by silencing it. No other primitive may touch it: a broken load generator
    # is a broken measurement, not an incident.
    "load_surge": lambda t: t.role == "loadgen",
    # the primitive moves a Deployment's claim (a StatefulSet's claim templates are immutable): a
    # service with a claim of its own, or a persistent store run as a Deployment
    "pvc_problem": lambda t: t.kind == "Deployment" and (bool(t.claims) or _persistent(t)),
    # needs a workload whose ServiceAccount is bound to Roles; the descriptors name none
    "rbac_revoke": lambda t: False,
    "network_partition": lambda t: bool(t.depends_on),
    "network_policy_deny": lambda t: bool(t.depends_on),
}


def viable(cls: type[Injector], t: Target) -> bool:
    """Whether primitive ``cls`` can act on target ``t``."""
    if not cls.targets or t.kind not in cls.targets:
        return False
    need = _NEEDS.get(cls.name)
    if need is not None:
        return need(t)
    return t.role != "loadgen"


def fault_primitives() -> list[str]:
    """Registered injectors that are root-cause primitives (noise is never the root cause)."""
    return [n for n in INJECTORS.names() if not n.startswith(NOISE_PREFIX)]


def candidates(apps: Sequence[AppSpec], injectors: Iterable[str] | None = None,
               covered: dict[tuple[str, str], list[str]] | None = None) -> list[Candidate]:
    """Every viable (primitive, target) pair over ``apps``, sorted by primitive then target."""
    covered = covered or {}
    names = list(injectors) if injectors is not None else fault_primitives()
    out = []
    for name in names:
        cls = INJECTORS.get(name)
        for app in apps:
            for t in app_targets(app):
                if viable(cls, t):
                    # a problem names the load generator by its role, not its namespace's name
                    users = covered.get((name, t.ref), []) + (covered.get((name, unnamed(t.app, t.kind)), [])
                                                              if t.role == "loadgen" else [])
                    out.append(Candidate(name, t, tuple(users)))
    return sorted(out, key=lambda c: (c.injector, c.target.ref))


def covered_pairs(problems: Iterable[Any]) -> dict[tuple[str, str], list[str]]:
    """(injector, target ref) -> ids of the problems (``sregym.core.problem.Problem``) using it."""
    out: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        for f in p.faults:
            if f.target.kind and f.target.name:
                out.setdefault((f.injector, f"{p.app.name}/{f.target.kind}/{f.target.name}"), []).append(p.id)
            elif f.target.kind and not f.target.labels:  # the app's own one (its load generator)
                out.setdefault((f.injector, unnamed(p.app.name, f.target.kind)), []).append(p.id)
    return out


def unnamed(app: str, kind: str) -> str:
    """The coverage key of a target naming only its kind: the app's own one of its role."""
    return f"{app}/{kind}/"


def load_apps(names: Sequence[str] = (), charts_dirs: Sequence[Path] = ()) -> list[AppSpec]:
    """The descriptors of the named apps (default: every app under the chart folders that has one)."""
    roots = list(charts_dirs) or None
    return [load_app(n, roots) for n in (names or list_apps(roots))]


def parse_target(ref: str) -> tuple[str, str, str]:
    """``hotel-reservation/Deployment/geo`` -> its three parts; a user error names the format."""
    parts = ref.split("/")
    if len(parts) != 3 or not all(parts):
        raise UserInputError(f"--target {ref!r}: expected <app>/<Kind>/<name>",
                             hint="see `sregym generate --list` for every viable target")
    return parts[0], parts[1], parts[2]


def find_candidate(injector: str, ref: str, apps: Sequence[AppSpec]) -> Candidate:
    """The viable pair ``(injector, ref)``, or a user error saying what is viable instead."""
    app_name, _, _ = parse_target(ref)
    INJECTORS.get(injector)  # unknown names raise UnknownNameError with the known ones
    if injector.startswith(NOISE_PREFIX):
        raise UserInputError(f"--injector {injector!r} is a noise type, never a root cause")
    chosen = [a for a in apps if a.name == app_name]
    if not chosen:
        raise UserInputError(f"--target {ref!r}: no app {app_name!r}",
                             hint=f"apps: {', '.join(a.name for a in apps)}")
    for c in candidates(chosen, [injector]):
        if c.target.ref == ref:
            return c
    others = [c.target.ref for c in candidates(chosen, [injector])]
    raise UserInputError(f"injector {injector!r} cannot act on {ref!r}",
                         hint=f"viable targets: {', '.join(others)}" if others
                         else f"{injector!r} has no viable target in {app_name}")


def _suggested_params(c: Candidate) -> dict[str, Any]:
    """The primitive's parameters: defaults, what the descriptor knows, and TODO for the rest."""
    cls = INJECTORS.get(c.injector)
    t = c.target
    known: dict[str, Any] = {}
    if c.injector == "credential_rotation" and t.datastore:
        known = {"secret": t.datastore.credentials_secret}
    elif c.injector in ("network_partition",) and t.depends_on:
        known = {"peer_service": t.depends_on[0]}
    elif c.injector == "network_policy_deny" and t.depends_on:
        known = {"dependency": t.depends_on[0]}
    elif c.injector == "load_surge":  # the rate every chart's load generator reads
        known = {"env": {"LOADGEN_RPS": TODO}}
    params: dict[str, Any] = {}
    for name, field in cls.Params.model_fields.items():
        if name in known:
            params[name] = known[name]
        elif field.is_required():
            params[name] = TODO
    return params


def _oracle_hint(c: Candidate) -> str:
    """A comment suggesting the mitigation oracle that judges this kind of fault's end state."""
    t = c.target
    hints = {
        "config_value": f"configmap_value {{name: {t.name}, key: ..., expect: {{equals: <working value>}}}}",
        "latent_sector_error": f"volume_readable {{workload: {t.name}, path: <the files' path>}}",
        "disk_full": f"disk_not_full {{workload: {t.name}, path: <the data path>}}",
        "resource_quota": f"workload_health {{workloads: [{t.name}]}} and/or quota_not_binding",
        "unschedulable": f"pods_schedulable {{}} and workload_health {{workloads: [{t.name}]}}",
        "service_misconfig": f"http_probe {{url: http://{t.name}.<namespace>.svc:<port>/<path>}}",
        "credential_rotation": "workload_health {workloads: [<a client of the store>]}",
        "network_policy_deny": "no_network_policy_denying {source_workload: ..., service: ...}",
        "load_surge": ("slo (users feel a surge as latency and errors; what fixes it is capacity on the "
                       "bottleneck, which a vulnerability fault such as resource_limits can make scarce)"),
    }
    return hints.get(c.injector, f"workload_health {{workloads: [{t.name}]}}, or slo for latency-only faults")


def skeleton(c: Candidate, problem_id: str) -> str:
    """A problem file for pair ``c`` with every author decision marked TODO (and refused by the
    schema until filled)."""
    t = c.target
    fault: dict[str, Any] = {"id": re.sub(r"[^a-z0-9_]", "_", t.name.lower()) or "fault",
                             "injector": c.injector, "params": _suggested_params(c),
                             # a load generator unnamed: the one of the namespace the app runs in
                             # (named, it is one namespace's: the app elsewhere kept its usual rate)
                             "target": {**({"namespace": t.namespace} if t.namespace else {}),
                                        "kind": t.kind, **({} if t.role == "loadgen" else {"name": t.name})}}
    body = {
        "schema_version": 1,
        "id": problem_id,
        "title": TODO,
        "alert": TODO,
        "app": {"name": t.app},
        "faults": [fault],
        # a surge's root cause is where capacity runs out, never the users' client
        "ground_truth": {"root_cause": TODO, "component": TODO if t.role == "loadgen" else t.name,
                         "mechanism": TODO, "details": [], "scope": [] if t.role == "loadgen" else [t.name],
                         "impact": TODO, "evidence": []},
        "oracles": {"mitigation": []},
        "difficulty": "medium",
        "tags": {"layer": TODO, "fault_family": c.injector, "failure_mode": TODO},
        "split": "test",
    }
    head = (f"# Generated by `sregym generate --injector {c.injector} --target {t.ref}`.\n"
            "# Fill every TODO: `sregym validate --static` refuses this file until you do (alert and\n"
            "# root_cause need real text, oracles.mitigation at least one oracle, tags.layer one of\n"
            "# application, kubernetes, control-plane, os, hardware, network, load). Then prove it on a cluster with\n"
            f"# `sregym validate {problem_id}`.\n"
            "# The alert is what the on-call SRE receives: the symptom, never the fault.\n"
            f"# Suggested mitigation oracle: {_oracle_hint(c)}\n")
    return head + yaml.safe_dump(body, sort_keys=False, width=100)


def default_problem_id(c: Candidate) -> str:
    short = {"hotel-reservation": "hotel", "online-shop": "shop"}.get(c.target.app, c.target.app)
    return re.sub(r"[^a-z0-9_]", "_", f"{short}_{c.target.name}_{c.injector}".lower())


def write_skeleton(c: Candidate, out: Path, problem_id: str | None = None, *, force: bool = False) -> Path:
    """Write the skeleton to ``out`` (a ``.yaml`` file, or a folder for ``<id>.yaml``)."""
    pid = problem_id or (out.stem if out.suffix in (".yaml", ".yml") else default_problem_id(c))
    path = out if out.suffix in (".yaml", ".yml") else out / f"{pid}.yaml"
    if path.stem != pid:
        raise UserInputError(f"--out {out}: the file name must be the problem id ({pid}.yaml)")
    if path.exists() and not force:
        raise UserInputError(f"--out {path}: the file exists", hint="choose another --id or pass --force")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(skeleton(c, pid), encoding="utf-8")
    return path
