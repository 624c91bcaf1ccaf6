"""Probe what fault mechanisms this node's kernel and tools support; print one JSON object.

Self-contained on purpose (standard library only): ``capabilities.py`` ships this file's source to
the node (``python3 - < nodeprobe.py``) and runs it either on the host (local provider) or in the
privileged node pod, whose host root is mounted at ``/host``. Every check is real and read-only or
happens in a throwaway network namespace that vanishes when the probe exits.

Output: ``{"capability": {"ok": bool, "detail": str}, ...}``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

HOST_ROOT = os.environ.get("HOST_ROOT", "/")


def _host(path: str) -> str:
    return os.path.join(HOST_ROOT, path.lstrip("/"))


def _run(*argv: str, timeout: float = 15) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return p.returncode, (p.stdout + p.stderr).strip()


def _kernel_config() -> dict[str, str]:
    text = ""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        try:
            with open(_host(f"/boot/config-{os.uname().release}")) as f:
                text = f.read()
        except OSError:
            return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:].split()[0]] = "n"
    return out


def _cfg(config: dict[str, str], name: str) -> str:
    return config.get(name, "?") if config else "?"


def _netns(script: str) -> tuple[int, str]:
    """Run a shell snippet as root in a fresh network namespace that dies with it."""
    if not shutil.which("unshare"):
        return 127, "unshare not found"
    return _run("unshare", "--net", "sh", "-c", script)


def probe() -> dict[str, dict[str, object]]:
    config = _kernel_config()
    res: dict[str, dict[str, object]] = {}

    def put(name: str, ok: bool, detail: str) -> None:
        res[name] = {"ok": bool(ok), "detail": detail}

    kprobe_files = [p for p in ("/sys/kernel/tracing/kprobe_events", "/sys/kernel/debug/tracing/kprobe_events")
                    if os.path.exists(p)]
    kp = _cfg(config, "CONFIG_KPROBES")
    put("kprobes", kp in ("y",) or bool(kprobe_files), f"CONFIG_KPROBES={kp}; kprobe_events: {kprobe_files or 'absent'}")
    override = _cfg(config, "CONFIG_BPF_KPROBE_OVERRIDE")
    put("bpf_override_return", res["kprobes"]["ok"] and override == "y",
        f"CONFIG_BPF_KPROBE_OVERRIDE={override} (needs kprobes too)")
    release = os.uname().release
    headers = [p for p in (f"/lib/modules/{release}/build", f"/usr/src/linux-headers-{release}",
                           "/sys/kernel/kheaders.tar.xz") if os.path.exists(_host(p)) or os.path.exists(p)]
    put("bcc_compile", bool(headers), f"kernel headers for {release}: {headers or 'absent'}")
    put("btf", os.path.exists("/sys/kernel/btf/vmlinux"), "/sys/kernel/btf/vmlinux "
        + ("present (libbpf CO-RE, BPF tracepoints)" if os.path.exists("/sys/kernel/btf/vmlinux") else "absent"))

    rc, out = _run("dmsetup", "targets") if shutil.which("dmsetup") else (127, "dmsetup not found")
    targets = {line.split()[0] for line in out.splitlines() if line and rc == 0}
    put("device_mapper", rc == 0, "targets: " + (", ".join(sorted(targets)) if rc == 0 else out.splitlines()[0] if out else "none"))
    put("dm_dust", "dust" in targets, "dm-dust target " + ("loaded" if "dust" in targets else "absent"))
    put("dm_flakey", "flakey" in targets, "dm-flakey target " + ("loaded" if "flakey" in targets else "absent"))

    rc, out = _netns("tc qdisc add dev lo root netem delay 10ms")
    put("netem", rc == 0, "netem qdisc created in a throwaway netns" if rc == 0 else f"netem refused: {out}")
    rc, out = _netns("tc qdisc add dev lo root tbf rate 1mbit burst 32kbit latency 400ms")
    put("tbf", rc == 0, "tbf qdisc created in a throwaway netns" if rc == 0 else f"tbf refused: {out}")
    rc, out = _netns("iptables -A OUTPUT -m statistic --mode random --probability 0.5 -j DROP")
    put("iptables_statistic", rc == 0,
        "iptables statistic match works in a throwaway netns" if rc == 0 else f"refused: {out}")

    rc, out = _netns("iptables -A OUTPUT -p udp --dport 53 -m string --algo bm --hex-string '|03|www|' -j DROP")
    put("iptables_string", rc == 0,
        "iptables string match works in a throwaway netns" if rc == 0 else f"refused: {out}")
    rc, out = _netns("iptables -A OUTPUT -j NFQUEUE --queue-num 7 --queue-bypass")
    put("nfqueue", rc == 0, "iptables NFQUEUE target works in a throwaway netns" if rc == 0 else f"refused: {out}")

    fusermount = shutil.which("fusermount3") or shutil.which("fusermount")
    put("fuse", os.path.exists("/dev/fuse"), f"/dev/fuse {'present' if os.path.exists('/dev/fuse') else 'absent'}; "
        f"fusermount: {fusermount or 'absent (not needed: sregym mounts itself)'}")
    put("loop", os.path.exists("/dev/loop-control"), "/dev/loop-control "
        + ("present" if os.path.exists("/dev/loop-control") else "absent"))

    seccomp_field = "absent"
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Seccomp:"):
                seccomp_field = line.split(":", 1)[1].strip()
    runc = next((p for p in ("/usr/sbin/runc", "/usr/bin/runc", "/usr/local/bin/runc", "/usr/local/sbin/runc")
                 if os.path.exists(_host(p))), None)
    libseccomp = ""
    if runc:
        rc, out = _run(_host(runc), "--version")
        libseccomp = next((line for line in out.splitlines() if line.startswith("libseccomp")), "")
    put("seccomp", seccomp_field != "absent" and bool(libseccomp),
        f"Seccomp field {seccomp_field}; runc {runc or 'not found'} {libseccomp or '(no libseccomp)'}")

    scope_path = "/proc/sys/kernel/yama/ptrace_scope"
    scope = open(scope_path).read().strip() if os.path.exists(scope_path) else "none (no yama)"
    strace = shutil.which("strace")
    put("ptrace", bool(strace) and scope != "3", f"strace: {strace or 'absent'}; yama ptrace_scope: {scope}")

    stress = shutil.which("stress-ng")
    rc, out = _run(stress, "--version") if stress else (127, "")
    put("stress_ng", rc == 0, out.splitlines()[0] if rc == 0 and out else "stress-ng absent")

    controllers_v2 = _host("/sys/fs/cgroup/cgroup.controllers")
    if os.path.exists(controllers_v2):
        put("cgroup_v2", True, "unified hierarchy at /sys/fs/cgroup")
        put("cgroup_v1", False, "no v1 controllers (pure cgroup v2)")
    else:
        v1 = sorted(d for d in ("cpu", "memory", "blkio", "cpuset", "pids", "freezer")
                    if os.path.isdir(_host(f"/sys/fs/cgroup/{d}")))
        unified = os.path.exists(_host("/sys/fs/cgroup/unified/cgroup.controllers"))
        put("cgroup_v1", bool(v1), f"v1 controllers: {', '.join(v1) or 'none'}")
        put("cgroup_v2", unified, "hybrid: cgroup2 at /sys/fs/cgroup/unified" if unified else "no cgroup2 mount")

    put("iptables", shutil.which("iptables") is not None, shutil.which("iptables") or "iptables absent")
    put("nsenter", shutil.which("nsenter") is not None, shutil.which("nsenter") or "nsenter absent")
    # A host-process NetworkPolicy firewall (the local cluster's kube-router) shows only as its chains.
    rc, _ = _run("iptables", "-w", "5", "-S", "KUBE-ROUTER-FORWARD") if shutil.which("iptables") else (127, "")
    put("network_policy_firewall", rc == 0, "kube-router's NetworkPolicy chains are in the node's iptables" if rc == 0
        else "no kube-router NetworkPolicy chains on the node")
    put("python3", True, sys.version.split()[0])
    return res


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
