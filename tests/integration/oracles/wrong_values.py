"""Another wrong value where the fault wrote one: what the ``another_wrong_value`` gaming strategy
writes, chosen from the fault's own params, the live object and the chart's (to never land on the
right value). An oracle that asks only that the fault's exact value be gone (``not_equals``) passes
it while users stay failed: a CPU limit of 11m for 10m, port 4224 for 4223, a tag rc2 for rc1,
another key of the same Secret for the password the fault removed.

Pure: it reads the objects it is given and returns the agent's kubectl commands. Where no other
wrong value makes sense (a network rule, a stress process, a scaled-down workload), it says so and
writes nothing, rather than inventing a pass.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TRUTHY = ("true", "yes", "on", "1")
FALSY = ("false", "no", "off", "0")


@dataclass
class Rewrite:
    """What the strategy writes for one fault (``said``), as kubectl commands run as the agent;
    no command: not applicable, ``said`` says why."""

    said: str
    commands: list[list[str]] = field(default_factory=list)
    restart: list[str] = field(default_factory=list)  # workloads to restart after (settings read at start)

    @property
    def applicable(self) -> bool:
        return bool(self.commands)


def bumped(value: str, avoid: Any = None) -> str | None:
    """Another wrong value of the same kind: the last number in ``value`` one higher (a port, a CPU or
    memory quantity, a release candidate), or a boolean spelled otherwise with the same meaning;
    never ``avoid`` (the chart's right value). None when the value holds neither."""
    low = value.strip().lower()
    for same in (TRUTHY, FALSY):
        if low in same:
            return next(s for s in same if s != low)
    numbers = list(re.finditer(r"\d+", value))
    if not numbers:
        return None
    last = numbers[-1]
    for step in (1, 2):
        out = f"{value[:last.start()]}{int(last.group()) + step}{value[last.end():]}"
        if out != str(avoid):
            return out
    return None


def next_number(value: int, avoid: Any = None) -> int:
    """Another wrong number (a port): one higher, or two where one higher is the right one."""
    return value + 1 if value + 1 != avoid else value + 2


def _container(obj: dict | None, name: str | None) -> tuple[int, dict]:
    containers = ((obj or {}).get("spec", {}).get("template", {}).get("spec", {}) or {}).get("containers") or [{}]
    for i, c in enumerate(containers):
        if name in (None, c.get("name")):
            return i, c
    return 0, containers[0]


def _ref(fault) -> str:
    return f"{fault.target.kind.lower()}/{fault.target.name}"


def _patch(fault, ns: str, ops: list[dict]) -> list[str]:
    return ["patch", fault.target.kind.lower(), fault.target.name, "-n", ns, "--type=json", "-p", json.dumps(ops)]


def another_wrong_value(fault, ns: str, live: dict | None, chart: dict | None,
                        secret_keys: dict[str, list[str]] | None = None) -> Rewrite:
    """The rewrite of ``fault``'s value to another wrong one. ``live``: the target object as it is
    (fault in place); ``chart``: as the chart renders it (the right value); ``secret_keys``: the keys
    of the Secrets the chart's entry names."""
    inj, p, t = fault.injector, fault.params, fault.target
    i, live_c = _container(live, t.container)
    _, chart_c = _container(chart, t.container)
    base = f"/spec/template/spec/containers/{i}"
    if inj == "env_var":
        right = next((e for e in chart_c.get("env") or [] if e["name"] == p["name"]), None)
        if p.get("value") is not None:
            new = bumped(p["value"], (right or {}).get("value"))
            if new is None:
                return Rewrite(f"not applicable: no other wrong value of {p['name']}={p['value']!r}")
            return Rewrite(f"{_ref(fault)} {p['name']}={new}",
                           [["set", "env", _ref(fault), "-n", ns, "-c", live_c.get("name", ""), f"{p['name']}={new}"]])
        ref = ((right or {}).get("valueFrom") or {}).get("secretKeyRef")
        others = sorted(k for k in (secret_keys or {}).get((ref or {}).get("name", ""), []) if k != (ref or {}).get("key"))
        if not ref or not others:  # the fault removed it: the same Secret's other key, else nothing fits
            return Rewrite(f"not applicable: {p['name']} was removed and no other key of its Secret to name")
        entry = {"name": p["name"], "valueFrom": {"secretKeyRef": {"name": ref["name"], "key": others[0]}}}
        env = live_c.get("env")
        op = {"op": "add", "path": f"{base}/env/-", "value": entry} if env else \
            {"op": "add", "path": f"{base}/env", "value": [entry]}
        return Rewrite(f"{_ref(fault)} {p['name']} from Secret {ref['name']} key {others[0]}", [_patch(fault, ns, [op])])
    if inj == "config_value":
        if p.get("value") is None:
            return Rewrite(f"not applicable: {p['key']} was removed")
        new = bumped(p["value"], ((chart or {}).get("data") or {}).get(p["key"]))
        if new is None:
            return Rewrite(f"not applicable: no other wrong value of {p['key']}={p['value']!r}")
        body = {"stringData" if t.kind == "Secret" else "data": {p["key"]: new}}
        return Rewrite(f"{t.kind.lower()}/{t.name} {p['key']}={new}",
                       [["patch", t.kind.lower(), t.name, "-n", ns, "--type=merge", "-p", json.dumps(body)]],
                       restart=list(p.get("restart") or []))
    if inj == "resource_limits":
        right = ((chart_c.get("resources") or {}).get("limits") or {})
        limits = {k: bumped(p[k], right.get(k)) for k in ("cpu", "memory") if p.get(k)}
        return Rewrite(f"{_ref(fault)} limits {limits}", [["set", "resources", _ref(fault), "-n", ns, "-c",
                                                           live_c.get("name", ""), "--limits="
                                                           + ",".join(f"{k}={v}" for k, v in limits.items())]])
    if inj == "image_tag":
        image = live_c.get("image", "")
        repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
        tag = bumped(p["tag"], (chart_c.get("image") or "").rsplit(":", 1)[-1]) or f"{p['tag']}-1"
        return Rewrite(f"{_ref(fault)} image {repo}:{tag}",
                       [["set", "image", _ref(fault), "-n", ns, f"{live_c.get('name', '')}={repo}:{tag}"]])
    if inj == "container_port":
        ports = live_c.get("ports") or []
        j = next((j for j, x in enumerate(ports) if p.get("port_name") in (None, x.get("name"))), None)
        if j is None:
            return Rewrite("not applicable: the container declares no such port")
        right = next((x["containerPort"] for x in chart_c.get("ports") or []
                      if x.get("name") == ports[j].get("name")), None)
        new = next_number(p["value"], right)
        return Rewrite(f"{_ref(fault)} containerPort {ports[j].get('name', j)}={new}",
                       [_patch(fault, ns, [{"op": "replace", "path": f"{base}/ports/{j}/containerPort", "value": new}])])
    if inj == "probe_misconfig":
        probe = f"{p.get('probe', 'readiness')}Probe"
        how = "httpGet" if (live_c.get(probe) or {}).get("httpGet") else "tcpSocket"
        new = next_number(p.get("port", 1))
        return Rewrite(f"{_ref(fault)} {probe} {how} port {new}",
                       [_patch(fault, ns, [{"op": "replace", "path": f"{base}/{probe}/{how}/port", "value": new}])])
    if inj == "container_args":
        args = list(live_c.get("args") or [])
        right = list(chart_c.get("args") or [])
        changed = []
        for flag, value in p["flags"].items():  # a flag with no other wrong value keeps the fault's
            if flag in args and args.index(flag) + 1 < len(args):
                chart_value = right[right.index(flag) + 1] if flag in right and right.index(flag) + 1 < len(right) else None
                new = bumped(value, chart_value)
                if new is not None:
                    args[args.index(flag) + 1] = new
                    changed.append(flag)
        if not changed:
            return Rewrite(f"not applicable: no other wrong value of {p['flags']}")
        return Rewrite(f"{_ref(fault)} args {' '.join(args)}",
                       [_patch(fault, ns, [{"op": "replace", "path": f"{base}/args", "value": args}])])
    if inj == "service_misconfig" and p.get("field") in ("port", "targetPort"):
        ports = ((live or {}).get("spec") or {}).get("ports") or []
        j = next((j for j, x in enumerate(ports) if p.get("port_name") in (None, x.get("name"))), 0)
        right = (((chart or {}).get("spec") or {}).get("ports") or [{}])[j].get(p["field"])
        new = next_number(p["value"], right)
        return Rewrite(f"service/{t.name} {p['field']}={new}",
                       [["patch", "service", t.name, "-n", ns, "--type=json", "-p",
                         json.dumps([{"op": "replace", "path": f"/spec/ports/{j}/{p['field']}", "value": new}])]])
    return Rewrite(f"not applicable: {inj} writes no value another one could stand for")
