"""Storage state read through the app's own data path, from inside its pod.

``volume_readable``: every file under a path reads back without an I/O error (the bad blocks a
latent sector error planted are no longer reached: the data was moved, restored or the volume
replaced). Reads use ``O_DIRECT`` where the filesystem allows it, so the page cache cannot hide
a bad block. ``disk_not_full``: the filesystem holding a path keeps free space.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import Field

from sregym.oracles import (CheckResult, ClusterError, MitigationOracle, WindowParams, exec_in_pod, mitigation_oracle,
                            running_pod, sample_window, window_of, window_result, workload_labels)

# Reads every regular file under $1 and prints one FAIL line per unreadable file, then a count.
READ_ALL = r"""
P="$1"
[ -e "$P" ] || { echo "MISSING $P"; exit 0; }
find "$P" -type f 2>/dev/null | {
  n=0
  while IFS= read -r f; do
    n=$((n+1))
    if command -v dd >/dev/null 2>&1; then
      if ! out=$(dd if="$f" of=/dev/null bs=1M iflag=direct 2>&1); then
        case "$out" in
          *"No such file"*) [ -e "$f" ] || continue;;  # removed since listed (e.g. pg_internal.init): not a read error
          *"Invalid argument"*) out=$(dd if="$f" of=/dev/null bs=1M 2>&1) || echo "FAIL $f: $(echo "$out" | head -1)";;
          *) echo "FAIL $f: $(echo "$out" | head -1)";;
        esac
      fi
    else
      out=$(cat "$f" 2>&1 >/dev/null) || { [ -e "$f" ] && echo "FAIL $f: $out"; }
    fi
  done
  echo "COUNT $n"
}
"""


class PodTarget(WindowParams):
    namespace: str | None = None
    pod: str | None = Field(None, description="a pod name")
    workload: str | None = Field(None, description="or: a Deployment/StatefulSet whose first Running pod is used")
    labels: dict[str, str] = Field(default_factory=dict, description="or: labels of the pod")
    container: str | None = None
    path: str = Field(..., description="the data path inside the container, e.g. /var/lib/postgresql/data")


class VolumeReadableParams(PodTarget):
    interval_seconds: float = Field(30.0, gt=0)
    timeout_seconds: float = Field(300.0, gt=0)


class DiskNotFullParams(PodTarget):
    max_used_percent: float = Field(90.0, gt=0, le=100)
    min_free_bytes: int = Field(0, ge=0)


class _InPod(MitigationOracle):
    def pod(self, ns: str) -> str:
        p = self.params
        labels = p.labels or (workload_labels(self.ctx.kube, ns, p.workload) if p.workload else {})
        if not (p.pod or labels):
            raise ClusterError(f"oracle {self.name}: name a pod, a workload or labels")
        return running_pod(self.ctx.kube, ns, pod=p.pod, labels=labels)["metadata"]["name"]

    def probe_in(self, ns: str) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    def check(self) -> CheckResult:
        ns = self.params.namespace or self.ctx.namespace
        samples = sample_window(lambda: self.probe_in(ns), window_of(self.params, self.ctx.window_seconds),
                                self.params.interval_seconds, min_pass_fraction=self.params.min_pass_fraction)
        return window_result(self.name, samples, self.params.min_pass_fraction,
                             evidence={"namespace": ns, "path": self.params.path})


def parse_read_all(out: str) -> tuple[int, list[str], bool]:
    """(files read, failures, path missing) from READ_ALL's output."""
    failures = [line[5:] for line in out.splitlines() if line.startswith("FAIL ")]
    count = next((int(line.split()[1]) for line in out.splitlines() if line.startswith("COUNT ")), 0)
    return count, failures, any(line.startswith("MISSING ") for line in out.splitlines())


@mitigation_oracle("volume_readable")
class VolumeReadable(_InPod):
    """Every file under ``path`` in the app's pod reads without an I/O error, over the window."""

    Params = VolumeReadableParams

    def probe_in(self, ns: str) -> tuple[bool, dict[str, Any]]:
        pod = self.pod(ns)
        script = f"set -- {shlex.quote(self.params.path)}\n{READ_ALL}"
        rc, out, err = exec_in_pod(self.ctx.kube, ns, pod, script, container=self.params.container,
                                   timeout=self.params.timeout_seconds)
        if rc != 0:
            return False, {"pod": pod, "reason": f"exec failed: {err.strip()[:200]}"}
        files, failures, missing = parse_read_all(out)
        if missing:
            return False, {"pod": pod, "reason": f"{self.params.path} does not exist in the pod"}
        if files == 0:
            return False, {"pod": pod, "reason": f"no files under {self.params.path}"}
        detail: dict[str, Any] = {"pod": pod, "files": files, "unreadable": len(failures)}
        if failures:
            detail["reason"] = "; ".join(failures[:3])[:400]
        return not failures, detail


def parse_df(out: str) -> tuple[float, int]:
    """(used percent, free bytes) from ``df -Pk PATH``."""
    fields = out.strip().splitlines()[-1].split()
    size_k, used_k, free_k = int(fields[1]), int(fields[2]), int(fields[3])
    used_pct = 100.0 * used_k / (used_k + free_k) if used_k + free_k else 100.0
    return round(used_pct, 2), free_k * 1024 if size_k else 0


@mitigation_oracle("disk_not_full")
class DiskNotFull(_InPod):
    """The filesystem under ``path`` keeps free space over the window."""

    Params = DiskNotFullParams

    def probe_in(self, ns: str) -> tuple[bool, dict[str, Any]]:
        pod = self.pod(ns)
        rc, out, err = exec_in_pod(self.ctx.kube, ns, pod, f"df -Pk {shlex.quote(self.params.path)}",
                                   container=self.params.container, timeout=60)
        if rc != 0:
            return False, {"pod": pod, "reason": f"df failed: {(err or out).strip()[:200]}"}
        used_pct, free = parse_df(out)
        ok = used_pct <= self.params.max_used_percent and free >= self.params.min_free_bytes
        detail: dict[str, Any] = {"pod": pod, "used_percent": used_pct, "free_bytes": free}
        if not ok:
            detail["reason"] = f"{self.params.path} is {used_pct}% full ({free} bytes free)"
        return ok, detail
