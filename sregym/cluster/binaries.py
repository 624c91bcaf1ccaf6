"""Build the cluster's Go binaries from their published modules, cached by version.

No registry serves Kubernetes binaries to this machine, so every component is compiled from its
Go module. ``go install k8s.io/kubernetes/cmd/...`` is refused because that module's go.mod holds
replace directives; instead we write a small wrapper module that requires the component and
replaces each ``k8s.io/<staging>`` module with its published ``v0.Y.Z`` release, then ``go build``.
The results live under ``<cache>/bin/<name>-<version>/`` outside the repository, so a warm machine
reuses them and a cold one builds them once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.16"
COREDNS_VERSION = "v1.13.1"
HELM_VERSION = "v3.19.5"
# The only version the module proxy here serves; it flags reported security flaws for it. We run
# only its NetworkPolicy firewall (no BGP, no service proxy, no pprof) on a single-host test
# cluster; kube-network-policies, the other candidate, needs nftables' queue (not in this kernel).
KUBE_ROUTER_VERSION = "v2.1.0"
GO_PROXY = os.environ.get("GOPROXY", "https://proxy.golang.org").split(",")[0]


def cache_root() -> Path:
    """Where slow builds are kept, outside any checkout (override with SREGYM_CACHE)."""
    return Path(os.environ.get("SREGYM_CACHE", "/var/cache/sregym"))


@dataclass(frozen=True)
class GoComponent:
    """One Go module whose commands we build, pinned at one version."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    staging_replaces: bool = False
    outputs: tuple[str, ...] = field(default=())
    # A main package of our own that imports these packages (blank imports) and runs ``main_call``;
    # built instead of ``packages`` when set (CoreDNS's documented way to choose its plugins).
    main_imports: tuple[str, ...] = ()
    main_call: str = ""

    @property
    def binary_names(self) -> tuple[str, ...]:
        return self.outputs or tuple(p.rsplit("/", 1)[-1] for p in self.packages)

    @property
    def variant(self) -> str:
        """What sets this build apart from another of the same version: a hash of its own main
        package, so a changed plugin set gets a new directory and warm machines rebuild once."""
        if not self.main_imports:
            return ""
        return "m" + hashlib.sha256(wrapper_main(self).encode()).hexdigest()[:8]

    @property
    def directory(self) -> Path:
        suffix = f"-{self.variant}" if self.variant else ""
        return cache_root() / "bin" / f"{self.name}-{self.version}{suffix}"

    def path(self, binary: str) -> Path:
        return self.directory / binary

    def is_built(self) -> bool:
        return all(self.path(b).is_file() for b in self.binary_names)


def _kube_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


KUBERNETES = GoComponent(
    name="kubernetes",
    module="k8s.io/kubernetes",
    version=KUBERNETES_VERSION,
    packages=tuple(
        f"k8s.io/kubernetes/cmd/{c}"
        for c in (
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubelet",
            "kube-proxy",
            "kubectl",
        )
    ),
    ldflags=_kube_ldflags(KUBERNETES_VERSION),
    staging_replaces=True,
)
ETCD = GoComponent(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version=ETCD_VERSION,
    packages=("go.etcd.io/etcd/server/v3",),
    outputs=("etcd",),
)
# The CoreDNS plugins we compile in: those the cluster's Corefile uses (sregym/cluster/local/config.py)
# and the rest of the stock set an SRE may write into a Corefile while repairing it, in plugin.cfg's
# order (the order they run in is core/dnsserver's, whatever the imports). Left out: the cloud and
# service-discovery back ends (route53, azure, clouddns, etcd, nomad), trace (Datadog, Zipkin) and
# dnssec (which links AWS Secrets Manager): about 500 of the full binary's 1,300 Go packages. A
# Corefile naming a left-out plugin fails to load with "no action found for directive ...".
COREDNS_PLUGINS = (
    "root", "metadata", "geoip", "cancel", "tls", "quic", "timeouts", "multisocket", "reload", "nsid",
    "bufsize", "bind", "debug", "ready", "health", "pprof", "metrics", "errors", "log", "dnstap", "local",
    "dns64", "acl", "any", "chaos", "loadbalance", "tsig", "cache", "rewrite", "header", "autopath",
    "minimal", "template", "transfer", "hosts", "k8s_external", "kubernetes", "file", "auto", "secondary",
    "loop", "forward", "grpc", "erratic", "whoami", "sign", "view",
)
_COREDNS_PACKAGES = tuple(f"github.com/coredns/coredns/plugin/{name}" for name in COREDNS_PLUGINS)
COREDNS = GoComponent(
    name="coredns",
    module="github.com/coredns/coredns",
    version=COREDNS_VERSION,
    packages=("github.com/coredns/coredns/coremain", *_COREDNS_PACKAGES),
    outputs=("coredns",),
    main_imports=("github.com/coredns/coredns/coremain", *_COREDNS_PACKAGES,
                  "github.com/coredns/caddy/onevent"),  # the `on` directive, from CoreDNS's own caddy fork
    main_call="coremain.Run()",
)
HELM = GoComponent(
    name="helm",
    module="helm.sh/helm/v3",
    version=HELM_VERSION,
    packages=("helm.sh/helm/v3/cmd/helm",),
    ldflags=(f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",),
)
KUBE_ROUTER = GoComponent(
    name="kube-router",
    module="github.com/cloudnativelabs/kube-router/v2",
    version=KUBE_ROUTER_VERSION,
    packages=("github.com/cloudnativelabs/kube-router/v2/cmd/kube-router",),
    ldflags=(f"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version={KUBE_ROUTER_VERSION}",),
)
COMPONENTS: tuple[GoComponent, ...] = (KUBERNETES, ETCD, HELM, COREDNS, KUBE_ROUTER)


class BuildError(RuntimeError):
    """A Go build failed; the message names the component and where its log is."""


def _staging_modules(component: GoComponent) -> list[str]:
    url = f"{GO_PROXY}/{component.module}/@v/{component.version}.mod"
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - fixed registry URL
        text = response.read().decode()
    mods = []
    for line in text.splitlines():
        line = line.strip()
        if "=> ./staging/" in line:
            mods.append(line.split()[0])
    return mods


def wrapper_gomod(component: GoComponent, staging: list[str]) -> str:
    """The go.mod of the wrapper module that builds ``component``."""
    lines = ["module sregym.local/build", "", "go 1.25", "", f"require {component.module} {component.version}"]
    if staging:
        y = component.version.lstrip("v").split(".", 1)[1]
        lines.append("")
        lines.append("replace (")
        lines += [f"\t{m} => {m} v0.{y}" for m in staging]
        lines.append(")")
    return "\n".join(lines) + "\n"


def wrapper_main(component: GoComponent) -> str:
    """The main package that builds ``component`` from ``main_imports`` (empty when it has none)."""
    if not component.main_imports:
        return ""
    called = component.main_call.split(".", 1)[0]
    lines = ["// Generated by sregym/cluster/binaries.py.", "package main", "", "import ("]
    for pkg in component.main_imports:
        lines.append(f'\t"{pkg}"' if pkg.rsplit("/", 1)[-1] == called else f'\t_ "{pkg}"')
    lines += [")", "", f"func main() {{ {component.main_call} }}"]
    return "\n".join(lines) + "\n"


def build(component: GoComponent, log=print) -> Path:
    """Build ``component`` unless it is cached; return its directory.

    A lock file serialises concurrent callers (two `cluster up`s, or CI and a developer)."""
    if component.is_built():
        return component.directory
    component.directory.parent.mkdir(parents=True, exist_ok=True)
    with open(component.directory.with_name(component.directory.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if component.is_built():
            return component.directory
        return _build_locked(component, log)


def _build_locked(component: GoComponent, log) -> Path:
    if shutil.which("go") is None:
        raise BuildError("`go` is not on PATH; install Go >= 1.25 (it builds the Kubernetes components)")
    staging = _staging_modules(component) if component.staging_replaces else []
    out = component.directory
    tmp_out = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    logfile = out.with_name(out.name + ".build.log")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false -mod=mod", GOTOOLCHAIN="local")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"sregym-build-{component.name}-") as work, open(logfile, "w") as logf:
        Path(work, "go.mod").write_text(wrapper_gomod(component, staging))
        if component.main_imports:
            Path(work, "main.go").write_text(wrapper_main(component))

        def go(*args: str) -> None:
            logf.write(f"$ go {' '.join(args)}\n")
            logf.flush()
            proc = subprocess.run(["go", *args], cwd=work, env=env, stdout=logf, stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                raise BuildError(f"building {component.name} {component.version} failed; see {logfile}")

        log(f"building {component.name} {component.version} from {component.module} (log: {logfile})")
        # every package pinned: a bare package path would mean @upgrade and pull the next minor
        go("get", *[f"{p}@{component.version}" for p in component.packages])
        targets = [(".", component.binary_names[0])] if component.main_imports else zip(
            component.packages, component.binary_names)
        for pkg, binary in targets:
            go("build", "-trimpath", "-ldflags", " ".join(("-s", "-w", *component.ldflags)), "-o", str(tmp_out / binary), pkg)
    shutil.rmtree(out, ignore_errors=True)
    tmp_out.rename(out)
    seconds = time.monotonic() - started
    # Kept beside the binaries so benchmarks/cluster_up.py can report the cold build time.
    out.with_name(out.name + ".build.json").write_text(
        json.dumps({"component": component.name, "version": component.version, "variant": component.variant,
                    "seconds": round(seconds, 1), "cpus": os.cpu_count()}))
    log(f"built {component.name} {component.version} in {seconds:.0f}s")
    return out


def recorded_build_seconds(component: GoComponent) -> float | None:
    try:
        return json.loads(component.directory.with_name(component.directory.name + ".build.json").read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return None


def build_all(components=COMPONENTS, log=print) -> None:
    # One after another: building two at a time was not measurably faster on 2 cores (coredns,
    # kube-router and etcd cold: 466 s and 381 s serially, 415 s and 400 s two at a time).
    for component in components:
        build(component, log=log)


# The agent's API proxy: a Go module of our own in the repository, cached by a hash of its sources
# (go.mod and go.sum included) rather than by a version. Its one dependency, Prometheus's PromQL
# parser, is pinned with its checksums in go.mod/go.sum: the first build fetches it through the Go
# module proxy (GOPROXY; ~90 MB of modules, about a minute on a cold machine), later builds find it
# in Go's module cache.
AGENT_PROXY_SOURCE = Path(__file__).resolve().parent / "agentproxy"


def agent_proxy_sources(source: Path = AGENT_PROXY_SOURCE) -> list[Path]:
    return sorted(p for p in source.iterdir()
                  if p.name in ("go.mod", "go.sum") or (p.suffix == ".go" and not p.name.endswith("_test.go")))


def agent_proxy_go_env() -> dict[str, str]:
    """Go's environment for building and testing the proxy: modules exactly as go.sum pins them
    (``-mod=readonly``: a missing or different checksum fails), fetched through the module proxy."""
    return dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false -mod=readonly", GOTOOLCHAIN="local")


def agent_proxy_binary(source: Path = AGENT_PROXY_SOURCE) -> Path:
    """Where the proxy built from ``source`` lives (its directory name carries the sources' hash)."""
    digest = hashlib.sha256()
    for f in agent_proxy_sources(source):
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return cache_root() / "bin" / f"agentproxy-{digest.hexdigest()[:16]}" / "agentproxy"


def build_agent_proxy(log=print, source: Path = AGENT_PROXY_SOURCE) -> Path:
    """Build the agent API proxy unless this version of its sources is cached; return the binary."""
    binary = agent_proxy_binary(source)
    if binary.is_file():
        return binary
    # an image that ships sregym (suite-runner) ships the proxy built from the same sources with it
    shipped = os.environ.get("SREGYM_AGENT_PROXY")
    if shipped and Path(shipped).is_file():
        return Path(shipped)
    if shutil.which("go") is None:
        raise BuildError("`go` is not on PATH; install Go >= 1.25 (it builds the agent's API proxy)")
    binary.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent.with_name(binary.parent.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        tmp = binary.parent.with_name(binary.parent.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        env = agent_proxy_go_env()
        log(f"building the agent API proxy from {source} into {binary.parent} (Go modules pinned by its go.sum: "
            f"from Go's module cache, or fetched through {env.get('GOPROXY') or 'the default module proxy'})")
        started = time.monotonic()
        proc = subprocess.run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp / binary.name), "."],
                              cwd=source, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BuildError(f"building the agent API proxy from {source} failed (its Go modules come through the "
                             f"module proxy, GOPROXY, on a first build):\n{proc.stderr.strip()[-2000:]}")
        shutil.rmtree(binary.parent, ignore_errors=True)
        tmp.rename(binary.parent)
    log(f"built the agent API proxy in {time.monotonic() - started:.0f}s ({binary})")
    return binary


if __name__ == "__main__":  # used by .ci/run before the package is installed
    wanted = set(sys.argv[1:])
    build_all([c for c in COMPONENTS if not wanted or c.name in wanted])
    if not wanted or "agentproxy" in wanted:
        build_agent_proxy()
