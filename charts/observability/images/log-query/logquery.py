"""Query container logs across pods by time and text, straight from the kubelet's log files.

No log store is obtainable here (Loki is large, none is packaged), and the kubelet already keeps
every container's output, timestamped, under /var/log/pods/<namespace>_<pod>_<uid>/<container>/
<restart>.log (CRI format: ``<RFC3339Nano> <stdout|stderr> <F|P> <text>``), including the previous
instance of a restarted container. One instance runs per node (a DaemonSet); the one that answers
a query asks its peers (found through a headless Service) for their part and merges the lines.

  GET /query?namespace=&pod=&container=&since=&until=&text=&regex=&limit=
      namespace, container: exact; pod: exact name or prefix (``frontend-`` finds every replica);
      since/until: RFC3339, epoch seconds, or a duration back from now (``15m``, ``2h``);
      text: case-insensitive substring; regex: a Python regular expression; limit: newest N (default 500).
      -> {"lines": [{"time", "namespace", "pod", "container", "stream", "node", "line"}], "truncated": bool}
  GET /local?... the same, this node only (what peers call).
  GET /healthz
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_LIMIT = 500
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class Filter:
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None
    since: float | None = None  # epoch seconds
    until: float | None = None
    text: str | None = None
    regex: re.Pattern | None = None
    limit: int = DEFAULT_LIMIT


def parse_time(value: str, now: float) -> float:
    """RFC3339 (any fraction), epoch seconds, or a duration back from ``now``, as epoch seconds."""
    value = value.strip()
    match = _RELATIVE.match(value)
    if match:
        return now - float(match.group(1)) * _SECONDS[match.group(2)]
    try:
        return float(value)
    except ValueError:
        pass
    return parse_rfc3339(value)


def parse_rfc3339(value: str) -> float:
    # fromisoformat takes at most 6 fraction digits; the kubelet writes 9
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", value)
    if not match:
        raise ValueError(f"bad time {value!r}: use RFC3339, epoch seconds or a duration like 15m")
    base, fraction, zone = match.groups()
    stamp = dt.datetime.fromisoformat(base + ("+00:00" if zone in (None, "Z") else zone))
    return stamp.timestamp() + (float("0." + fraction) if fraction else 0.0)


def parse_filter(params: dict[str, list[str]], now: float) -> Filter:
    def one(name: str) -> str | None:
        values = params.get(name)
        return values[0] if values and values[0] != "" else None

    regex = one("regex")
    try:
        compiled = re.compile(regex) if regex else None
    except re.error as e:
        raise ValueError(f"bad regex: {e}") from None
    limit = int(one("limit") or DEFAULT_LIMIT)
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    text = one("text")
    return Filter(namespace=one("namespace"), pod=one("pod"), container=one("container"),
                  since=parse_time(one("since"), now) if one("since") else None,
                  until=parse_time(one("until"), now) if one("until") else None,
                  text=text.lower() if text else None, regex=compiled, limit=limit)


def parse_cri_line(raw: str) -> tuple[float, str, str] | None:
    """(epoch seconds, stream, text) of one CRI log line, or None when it is not one."""
    parts = raw.rstrip("\n").split(" ", 3)
    if len(parts) < 3:
        return None
    try:
        when = parse_rfc3339(parts[0])
    except ValueError:
        return None
    return when, parts[1], parts[3] if len(parts) == 4 else ""


def pod_dir_parts(name: str) -> tuple[str, str] | None:
    """(namespace, pod) from a /var/log/pods directory name ``<namespace>_<pod>_<uid>``."""
    parts = name.split("_")
    return (parts[0], parts[1]) if len(parts) == 3 else None


def _open(path: Path):
    return gzip.open(path, "rt", errors="replace") if path.suffix == ".gz" else open(path, errors="replace")


def scan(root: Path, flt: Filter, node: str, excluded_namespaces: frozenset[str] = frozenset()) -> list[dict]:
    """Matching lines on this node, oldest first (at most ``flt.limit``, the newest kept)."""
    found: list[dict] = []
    if not root.is_dir():
        return found
    for pod_dir in root.iterdir():
        ids = pod_dir_parts(pod_dir.name)
        if ids is None:
            continue
        namespace, pod = ids
        if namespace in excluded_namespaces or (flt.namespace and namespace != flt.namespace):
            continue
        if flt.pod and not (pod == flt.pod or pod.startswith(flt.pod)):
            continue
        for container_dir in pod_dir.iterdir():
            if not container_dir.is_dir() or (flt.container and container_dir.name != flt.container):
                continue
            for log_file in container_dir.iterdir():
                try:
                    if flt.since is not None and log_file.stat().st_mtime < flt.since:
                        continue  # nothing written since
                    with _open(log_file) as lines:
                        for raw in lines:
                            parsed = parse_cri_line(raw)
                            if parsed is None:
                                continue
                            when, stream, text = parsed
                            if (flt.since is not None and when < flt.since) or (flt.until is not None and when > flt.until):
                                continue
                            if flt.text and flt.text not in text.lower():
                                continue
                            if flt.regex and not flt.regex.search(text):
                                continue
                            found.append({"time": raw.split(" ", 1)[0], "ts": when, "namespace": namespace,
                                          "pod": pod, "container": container_dir.name, "stream": stream,
                                          "node": node, "line": text})
                except OSError:
                    continue  # rotated away while we read
    return newest(found, flt.limit)


def newest(lines: list[dict], limit: int) -> list[dict]:
    lines.sort(key=lambda entry: entry["ts"])
    return lines[-limit:]


def merge(parts: list[list[dict]], limit: int) -> tuple[list[dict], bool]:
    """Lines of every node in time order, the newest ``limit`` kept; says whether any were cut."""
    everything = [line for part in parts for line in part]
    kept = newest(everything, limit)
    return kept, len(everything) > len(kept) or any(len(p) >= limit for p in parts)


class Service:
    def __init__(self, root: Path, node: str, peers_dns: str | None, port: int, excluded: frozenset[str]) -> None:
        self.root, self.node, self.peers_dns, self.port, self.excluded = root, node, peers_dns, port, excluded

    def peers(self) -> list[str]:
        if not self.peers_dns:
            return []
        try:
            infos = socket.getaddrinfo(self.peers_dns, self.port, socket.AF_INET, socket.SOCK_STREAM)
        except socket.gaierror:
            return []
        return sorted({info[4][0] for info in infos})

    def local(self, flt: Filter) -> list[dict]:
        return scan(self.root, flt, self.node, self.excluded)

    def query(self, params: dict[str, list[str]]) -> dict:
        flt = parse_filter(params, time.time())
        others = [ip for ip in self.peers() if ip != os.environ.get("POD_IP")]
        parts = [self.local(flt)]
        errors = []

        def ask(ip: str) -> list[dict]:
            # pass resolved absolute times, so relative ones mean the same on every node
            fixed = dict(params)
            for key, value in (("since", flt.since), ("until", flt.until)):
                if value is not None:
                    fixed[key] = [repr(value)]
            url = f"http://{ip}:{self.port}/local?{urlencode(fixed, doseq=True)}"
            with urllib.request.urlopen(url, timeout=20) as response:  # noqa: S310 - in-cluster peer
                return json.load(response)["lines"]

        if others:
            with ThreadPoolExecutor(max_workers=min(8, len(others))) as pool:
                for ip, future in [(ip, pool.submit(ask, ip)) for ip in others]:
                    try:
                        parts.append(future.result())
                    except Exception as e:  # noqa: BLE001 - one node down must not hide the others
                        errors.append(f"{ip}: {e}")
        lines, truncated = merge(parts, flt.limit)
        return {"lines": [{k: v for k, v in line.items() if k != "ts"} for line in lines],
                "truncated": truncated, "errors": errors or None}


class Handler(BaseHTTPRequestHandler):
    service: Service
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        params = parse_qs(url.query)
        try:
            if url.path == "/healthz":
                self._send(200, {"node": self.service.node, "root": str(self.service.root)})
            elif url.path == "/query":
                self._send(200, self.service.query(params))
            elif url.path == "/local":
                lines = self.service.local(parse_filter(params, time.time()))
                self._send(200, {"lines": lines})
            else:
                self._send(404, {"error": "use GET /query (see the module docstring for parameters)"})
        except ValueError as e:
            self._send(400, {"error": str(e)})


def main() -> None:
    port = int(os.environ.get("PORT", "8080"))
    excluded = frozenset(n for n in os.environ.get("EXCLUDE_NAMESPACES", "").split(",") if n)
    service = Service(Path(os.environ.get("LOG_ROOT", "/var/log/pods")), os.environ.get("NODE_NAME", socket.gethostname()),
                      os.environ.get("PEERS_DNS") or None, port, excluded)
    server = ThreadingHTTPServer(("0.0.0.0", port), type("BoundHandler", (Handler,), {"service": service}))
    server.daemon_threads = True
    print(json.dumps({"msg": "log query listening", "port": port, "node": service.node,
                      "excluded_namespaces": sorted(excluded)}), flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
