"""The `local` provider: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
kube-proxy and containerd as host processes, CNI bridge networking and CoreDNS, all upstream, and
kube-router's firewall as the NetworkPolicy enforcer (the bridge plugin enforces none).

``up`` is idempotent (running components are kept, dead ones restarted), ``down`` stops every
process by PID and removes every mount, network namespace, bridge, veth and iptables chain the
cluster created. State lives in one data directory per cluster name (see ``paths.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from sregym.cluster import binaries, oci
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.local import hostnet, processes
from sregym.cluster.local.config import (
    COREDNS_IMAGE_REPO,
    COREDNS_READY_PORT,
    PAUSE_IMAGE,
    LocalNetwork,
    LocalPorts,
    bridge_name,
    cni_conflist,
    containerd_toml,
    coredns_manifests,
    kube_proxy_config,
    kube_router_rbac,
    kubelet_config,
    node_name,
    storage_manifests,
    write_text,
)
from sregym.cluster.local.paths import LocalPaths
from sregym.cluster.pki import ClusterPKI
from sregym.core.errors import ClusterError, PrerequisiteError

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # pod IPs are reached directly

COMPONENTS = ("containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
              "kube-proxy", "kube-router")
HOST_TOOLS = {"containerd": "containerd", "runc": "runc", "ctr": "containerd", "iptables": "iptables",
              "iptables-save": "iptables", "ipset": "ipset", "ip": "iproute2", "mount": "mount", "gcc": "gcc"}
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback", "bandwidth")
Progress = Callable[[str], None]


class LocalCluster:
    """One named local cluster on this host."""

    provider = "local"

    def __init__(self, name: str = "default", ports: LocalPorts | None = None):
        self.name = name
        self.paths = LocalPaths(name)
        self.ports = ports or LocalPorts()
        self.net = LocalNetwork(bridge=bridge_name(name))
        self.pki = ClusterPKI(self.paths.pki)
        self.node = node_name()

    # ------------------------------------------------------------------ public API
    def handle(self) -> ClusterHandle:
        return ClusterHandle(name=self.name, provider="local", kubeconfig=self.paths.admin_kubeconfig,
                             data_dir=self.paths.root)

    def up(self, progress: Progress = lambda s: None, *, timeout: float = 300) -> ClusterHandle:
        started = time.monotonic()
        self._preflight()
        dead = self._forget_dead()
        if dead:
            progress(f"restarting components that were not running: {', '.join(dead)}")
        progress("binaries: building or reusing Kubernetes, etcd, helm, CoreDNS and kube-router")
        binaries.build_all(log=progress)
        self._write_metadata()
        progress("certificates and kubeconfigs")
        self._write_pki_and_kubeconfigs()
        progress("host network: bridge, routes, egress guard")
        hostnet.setup(self.paths, self.net)
        self._write_configs()
        self._start("containerd", self._containerd_argv())
        self._wait(lambda: self.paths.containerd_socket.is_socket() and oci.ctr(
            self.paths.containerd_socket, "version", check=False).returncode == 0, "containerd socket", 30)
        progress("images: pause and CoreDNS")
        self._ensure_images()
        self._start("etcd", self._etcd_argv())
        self._wait(self._etcd_healthy, "etcd health", 60)
        self._start("kube-apiserver", self._apiserver_argv())
        progress("waiting for kube-apiserver")
        self._wait(self._apiserver_ready, "kube-apiserver /readyz", 120)
        self._start("kube-controller-manager", self._controller_manager_argv())
        self._start("kube-scheduler", self._scheduler_argv())
        self._start("kubelet", self._kubelet_argv())
        self._start("kube-proxy", self._kube_proxy_argv())
        progress("add-ons: CoreDNS and the default StorageClass")
        kube = self.handle().kube
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                     input=coredns_manifests(self.net, self._coredns_image()) + "---\n" + storage_manifests()
                     + "---\n" + kube_router_rbac())
        self._start("kube-router", self._kube_router_argv())
        progress("waiting for the node to be Ready")
        self._wait(self._node_ready, f"node {self.node} Ready", max(30.0, timeout - (time.monotonic() - started)))
        self._wait(self._coredns_ready, "CoreDNS Ready", 180)
        merge_kubeconfig(self.paths.admin_kubeconfig, f"sregym-{self.name}")
        progress(f"cluster {self.name!r} is up in {time.monotonic() - started:.0f}s")
        return self.handle()

    def down(self, progress: Progress = lambda s: None, *, purge: bool = False) -> list[str]:
        """Stop everything and remove host state. ``purge`` also deletes the data directory."""
        self._require_root()
        removed: list[str] = []
        if processes.running_pid(self.paths, "kube-apiserver") and processes.running_pid(self.paths, "kubelet"):
            progress("draining pods through the kubelet (so CNI releases their networks)")
            removed += self._drain_pods()
        for name in ("kube-router", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet",
                     "kube-apiserver", "etcd"):
            if processes.stop(self.paths, name):
                removed.append(f"process {name}")
        kp = binaries.KUBERNETES.path("kube-proxy")
        if kp.exists():  # removes kube-proxy's iptables rules and chains
            subprocess.run([str(kp), "--cleanup"], capture_output=True, timeout=60)
        removed += self._remove_containers()
        if processes.stop(self.paths, "containerd"):
            removed.append("process containerd")
        for pid in processes.pids_with_arg("containerd-shim-runc-v2", str(self.paths.containerd_socket)):
            processes.signal_and_wait(pid, 5)
            removed.append(f"process containerd-shim {pid}")
        progress("removing mounts, network namespaces, bridge and iptables chains")
        removed += hostnet.teardown(self.paths, self.net)
        unmerge_kubeconfig(f"sregym-{self.name}")
        if purge and self.paths.root.exists():
            shutil.rmtree(self.paths.root)
            removed.append(f"data {self.paths.root}")
        return removed

    def status(self) -> dict[str, str]:
        out = {}
        for name in COMPONENTS:
            pid = processes.running_pid(self.paths, name)
            out[name] = f"running (pid {pid})" if pid else "stopped"
        if out["kube-apiserver"].startswith("running"):
            out["node"] = "Ready" if self._node_ready() else "NotReady"
            out["coredns"] = "Ready" if self._coredns_ready() else "not ready"
        return out

    def is_up(self) -> bool:
        return all(processes.running_pid(self.paths, c) for c in COMPONENTS) and self._node_ready()

    def log_path(self, component: str) -> Path:
        if component not in COMPONENTS:
            from sregym.core.errors import UnknownNameError

            raise UnknownNameError("component", component, list(COMPONENTS))
        return self.paths.log(component)

    def daemon_pids(self) -> dict[str, int]:
        pids = {c: processes.running_pid(self.paths, c) for c in COMPONENTS}
        return {c: p for c, p in pids.items() if p}

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _require_root() -> None:
        if os.geteuid() != 0:
            raise PrerequisiteError(
                "the local cluster needs root: it runs containerd, the kubelet, iptables and mounts",
                hint="rerun as root (sudo sregym cluster up), or use --provider kind/existing")

    def _preflight(self) -> None:
        self._require_root()
        missing = [f"{tool} (Debian package {pkg})" for tool, pkg in HOST_TOOLS.items() if not shutil.which(tool)]
        missing += [f"CNI plugin {p} (Debian package containernetworking-plugins)" for p in CNI_PLUGINS
                    if not Path("/usr/lib/cni", p).is_file()]
        if missing:
            raise PrerequisiteError("missing prerequisites: " + ", ".join(missing),
                                    hint="apt-get install containerd runc containernetworking-plugins iptables ipset "
                                         "iproute2 gcc libc6-dev (or run scripts/install.sh, which installs them)")
        self._check_data_dir()
        for component, port in self._ports_for_check().items():
            if processes.running_pid(self.paths, component):
                continue
            if _port_in_use(port):
                raise PrerequisiteError(
                    f"port {port} ({component}) is already in use on this host",
                    hint="stop whatever listens there (`ss -ltnp sport = :%d`), or run `sregym cluster down` "
                         "if it is a previous sregym cluster" % port)

    def _ports_for_check(self) -> dict[str, int]:
        p = self.ports
        return {"etcd": p.etcd_client, "kube-apiserver": p.apiserver, "kubelet": p.kubelet,
                "kube-controller-manager": p.controller_manager, "kube-scheduler": p.scheduler,
                "kube-proxy": p.proxy_healthz, "kube-router": p.kube_router_health}

    def _forget_dead(self) -> list[str]:
        """Drop pidfiles of daemons that are gone (killed, crashed, host rebooted)."""
        dead = []
        for name in COMPONENTS:
            if self.paths.pidfile(name).exists() and not processes.running_pid(self.paths, name):
                self.paths.pidfile(name).unlink()
                dead.append(name)
        return dead

    def _check_data_dir(self) -> None:
        meta = self.paths.root / "cluster.json"
        if not self.paths.root.exists() or not any(self.paths.root.iterdir()):
            return
        try:
            data = json.loads(meta.read_text())
            assert data["name"] == self.name
        except (OSError, ValueError, KeyError, AssertionError):
            raise ClusterError(f"the data directory {self.paths.root} is not a readable sregym cluster "
                               f"({meta} is missing or corrupt)",
                               hint=f"remove it with `sregym cluster down --purge --name {self.name}`") from None
        if data.get("kubernetes") != binaries.KUBERNETES_VERSION:
            raise ClusterError(f"cluster {self.name!r} was created with Kubernetes {data.get('kubernetes')}, "
                               f"this sregym runs {binaries.KUBERNETES_VERSION}",
                               hint=f"recreate it: `sregym cluster down --purge --name {self.name}` then `up`")
        if self.pki.ca.cert.exists():
            try:
                from cryptography import x509

                x509.load_pem_x509_certificate(self.pki.ca.cert.read_bytes())
            except ValueError:
                raise ClusterError(f"{self.pki.ca.cert} is corrupt",
                                   hint=f"`sregym cluster down --purge --name {self.name}` then `up`") from None

    def _write_metadata(self) -> None:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        meta = self.paths.root / "cluster.json"
        if not meta.exists():
            meta.write_text(json.dumps({"name": self.name, "kubernetes": binaries.KUBERNETES_VERSION,
                                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "node": self.node}, indent=2))

    # ------------------------------------------------------------------ config
    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def _write_pki_and_kubeconfigs(self) -> None:
        pki, net = self.pki, self.net
        pki.ensure_ca()
        pki.issue("apiserver", "kube-apiserver", server=True, client=False,
                  dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       f"kubernetes.default.svc.{net.cluster_domain}", "localhost", self.node),
                  ips=("127.0.0.1", net.node_ip, net.api_service_ip))
        pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", orgs=("system:masters",))
        pki.issue("kubelet-serving", self.node, server=True, client=False, dns=(self.node, "localhost"),
                  ips=("127.0.0.1", net.node_ip))
        users = {
            "admin": ("kubernetes-admin", ("system:masters",)),
            "kube-controller-manager": ("system:kube-controller-manager", ()),
            "kube-scheduler": ("system:kube-scheduler", ()),
            "kubelet": (f"system:node:{self.node}", ("system:nodes",)),
            "kube-proxy": ("system:kube-proxy", ()),
            "kube-router": ("system:kube-router", ()),
        }
        for name, (cn, orgs) in users.items():
            pair = pki.issue(f"{name}-client", cn, orgs=orgs)
            path = self.paths.admin_kubeconfig if name == "admin" else self.paths.root / f"{name}.kubeconfig"
            pki.kubeconfig(path, server=self.api_url, user=cn, pair=pair, cluster=f"sregym-{self.name}",
                           context=f"sregym-{self.name}" if name == "admin" else None)

    def _write_configs(self) -> None:
        """Write config files; a running component whose config changed is restarted by ``up``."""
        p = self.paths
        changed = {
            "containerd": write_text(p.root / "containerd.toml", containerd_toml(p, self.net)),
            "kubelet": write_text(p.root / "kubelet.yaml", kubelet_config(p, self.net, self.ports)),
            "kube-proxy": write_text(p.root / "kube-proxy.yaml",
                                     kube_proxy_config(p, self.net, self.ports, self.node)),
        }
        write_text(p.root / "cni" / "net.d" / "10-sregym.conflist", cni_conflist(p, self.net))
        write_text(p.root / "resolv.conf", f"# pods use cluster DNS ({self.net.dns_ip}); no host resolvers\n")
        for name, was_changed in changed.items():
            if was_changed and processes.running_pid(self.paths, name):
                processes.stop(self.paths, name)

    def _containerd_argv(self) -> list[str]:
        return [shutil.which("containerd") or "containerd", "--config", str(self.paths.root / "containerd.toml")]

    def _etcd_argv(self) -> list[str]:
        p = self.ports
        return [str(binaries.ETCD.path("etcd")), "--name", self.node, "--data-dir", str(self.paths.etcd_data),
                "--listen-client-urls", f"http://127.0.0.1:{p.etcd_client}",
                "--advertise-client-urls", f"http://127.0.0.1:{p.etcd_client}",
                "--listen-peer-urls", f"http://127.0.0.1:{p.etcd_peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{p.etcd_peer}",
                "--initial-cluster", f"{self.node}=http://127.0.0.1:{p.etcd_peer}",
                "--listen-metrics-urls", "http://127.0.0.1:0",
                "--quota-backend-bytes", str(4 << 30), "--snapshot-count", "10000", "--log-level", "warn"]

    def _apiserver_argv(self) -> list[str]:
        pki, net = self.paths.pki, self.net
        return [str(binaries.KUBERNETES.path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
                f"--secure-port={self.ports.apiserver}", "--bind-address=0.0.0.0",
                f"--advertise-address={net.node_ip}",
                f"--service-cluster-ip-range={net.service_cidr}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={pki / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                f"--service-account-issuer=https://kubernetes.default.svc.{net.cluster_domain}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--authorization-mode=Node,RBAC",
                # DenyServiceExternalIPs: nobody may claim an external IP on a Service, so an agent
                # cannot route the conductor's or the load generator's traffic to a pod of its own
                # (CVE-2020-8554). PodSecurity is on by default; namespaces opt in by label.
                "--enable-admission-plugins=NodeRestriction,DenyServiceExternalIPs",
                "--allow-privileged=true", "--profiling=false", "--event-ttl=1h", "--v=1"]

    def _controller_manager_argv(self) -> list[str]:
        pki, kcfg = self.paths.pki, str(self.paths.root / "kube-controller-manager.kubeconfig")
        return [str(binaries.KUBERNETES.path("kube-controller-manager")),
                f"--kubeconfig={kcfg}", f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}",
                "--bind-address=127.0.0.1", f"--secure-port={self.ports.controller_manager}",
                f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--use-service-account-credentials=true", "--leader-elect=false",
                "--allocate-node-cidrs=true", f"--cluster-cidr={self.net.pod_cidr}", "--node-cidr-mask-size=24",
                f"--service-cluster-ip-range={self.net.service_cidr}",
                # Upstream's single-node development provisioner backs the default StorageClass.
                "--enable-hostpath-provisioner=true", "--controllers=*,bootstrapsigner,tokencleaner", "--v=1"]

    def _scheduler_argv(self) -> list[str]:
        kcfg = str(self.paths.root / "kube-scheduler.kubeconfig")
        return [str(binaries.KUBERNETES.path("kube-scheduler")), f"--kubeconfig={kcfg}",
                f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}",
                "--bind-address=127.0.0.1", f"--secure-port={self.ports.scheduler}", "--leader-elect=false", "--v=1"]

    def _kubelet_argv(self) -> list[str]:
        return [str(binaries.KUBERNETES.path("kubelet")), f"--config={self.paths.root / 'kubelet.yaml'}",
                f"--kubeconfig={self.paths.root / 'kubelet.kubeconfig'}", f"--root-dir={self.paths.kubelet_root}",
                f"--node-ip={self.net.node_ip}", f"--hostname-override={self.node}",
                # cAdvisor (inside the kubelet) looks for containerd at /run/containerd by default;
                # without ours it reports per-pod cgroups only, with no per-container series.
                f"--containerd={self.paths.containerd_socket}", "--v=1"]

    def _kube_proxy_argv(self) -> list[str]:
        return [str(binaries.KUBERNETES.path("kube-proxy")), f"--config={self.paths.root / 'kube-proxy.yaml'}",
                "--v=1"]

    def _kube_router_argv(self) -> list[str]:
        # Firewall only: the NetworkPolicy controller (iptables + ipset). Routing stays with the
        # bridge plugin and services with kube-proxy.
        return [str(binaries.KUBE_ROUTER.path("kube-router")),
                f"--kubeconfig={self.paths.root / 'kube-router.kubeconfig'}",
                "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
                f"--hostname-override={self.node}", f"--service-cluster-ip-range={self.net.service_cidr}",
                f"--health-port={self.ports.kube_router_health}", "--metrics-port=0", "--enable-cni=false",
                "--iptables-sync-period=1m", "--v=0"]

    # ------------------------------------------------------------------ images
    def _coredns_image(self) -> str:
        # tagged with the build's plugin set too: a changed set is a new image, not a stale one reused
        return f"{COREDNS_IMAGE_REPO}:{binaries.COREDNS_VERSION}-{binaries.COREDNS.variant}"

    def _ensure_images(self) -> None:
        sock = self.paths.containerd_socket
        cache = binaries.cache_root() / "images"
        if not oci.image_present(sock, PAUSE_IMAGE):
            pause_bin = cache / "pause" / "pause"
            src = Path(__file__).with_name("pause.c")
            if not pause_bin.exists():
                pause_bin.parent.mkdir(parents=True, exist_ok=True)
                proc = subprocess.run(["gcc", "-static", "-O2", "-o", str(pause_bin), str(src)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise PrerequisiteError(f"building the pause program failed: {proc.stderr.strip()}",
                                            hint="apt-get install gcc libc6-dev")
            archive = cache / "pause" / "pause-3.10.tar"
            oci.write_docker_archive(archive, PAUSE_IMAGE, {"/pause": (pause_bin, 0o755)}, entrypoint=["/pause"],
                                     user="65535:65535")
            oci.import_archive(sock, archive)
        ref = self._coredns_image()
        if not oci.image_present(sock, ref):
            archive = cache / "coredns" / f"{binaries.COREDNS.directory.name}.tar"
            oci.write_docker_archive(archive, ref, {"/coredns": (binaries.COREDNS.path("coredns"), 0o755)},
                                     entrypoint=["/coredns"], exposed_ports=["53/udp", "53/tcp", "9153/tcp"])
            oci.import_archive(sock, archive)

    # ------------------------------------------------------------------ processes
    def _start(self, name: str, argv: list[str]) -> None:
        if processes.running_pid(self.paths, name):
            return
        processes.start(self.paths, processes.Daemon(name, argv))
        time.sleep(0.3)
        if not processes.running_pid(self.paths, name):
            tail = _tail(self.paths.log(name), 15)
            raise ClusterError(f"{name} exited right after starting; last lines of {self.paths.log(name)}:\n{tail}")

    def _wait(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - not ready yet, keep polling
                pass
            for name in COMPONENTS:
                if self.paths.pidfile(name).exists() and not processes.running_pid(self.paths, name):
                    raise ClusterError(f"{name} died while waiting for {what}; last lines of its log:\n"
                                       + _tail(self.paths.log(name), 20),
                                       hint=f"full log: sregym cluster logs {name}")
            time.sleep(0.5)
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}",
                           hint="see `sregym cluster status` and `sregym cluster logs <component>`")

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports.etcd_client}/health", timeout=2) as r:
            return json.loads(r.read()).get("health") == "true"

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        pair = self.pki.pair("admin-client")
        ctx.load_cert_chain(str(pair.cert), str(pair.key))
        return ctx

    def _apiserver_ready(self) -> bool:
        with urllib.request.urlopen(f"{self.api_url}/readyz", timeout=3, context=self._ssl()) as r:
            return r.status == 200

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.api_url}{path}", timeout=5, context=self._ssl()) as r:
            return json.loads(r.read())

    def _node_ready(self) -> bool:
        try:
            node = self._get(f"/api/v1/nodes/{self.node}")
        except Exception:  # noqa: BLE001
            return False
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))

    def _coredns_ready(self) -> bool:
        """A live CoreDNS pod answers its own readiness endpoint.

        Neither the Deployment's readyReplicas nor the pod's Ready condition will do right after
        `up`: `down` stops the controller manager before draining, so the Deployment still says
        1 ready replica of a pod that is gone, and after a kubelet restart a pod's condition is
        stale until the kubelet re-probes. Asking CoreDNS itself (its `ready` plugin, the endpoint
        the readiness probe uses) over the bridge is true at the moment it is asked."""
        try:
            pods = self._get("/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns")["items"]
        except Exception:  # noqa: BLE001
            return False
        for pod in pods:
            ip = pod.get("status", {}).get("podIP")
            if ip and not pod["metadata"].get("deletionTimestamp"):
                try:
                    with _NO_PROXY.open(f"http://{ip}:{COREDNS_READY_PORT}/ready", timeout=2) as r:
                        if r.status == 200:
                            return True
                except OSError:
                    continue
        return False

    def _drain_pods(self) -> list[str]:
        for name in ("kube-controller-manager", "kube-scheduler"):  # nothing may recreate pods now
            processes.stop(self.paths, name)
        kube = self.handle().kube
        kube.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force", "--wait=false",
                     check=False, timeout=60)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            tasks = oci.ctr(self.paths.containerd_socket, "tasks", "ls", "-q", check=False).stdout.split()
            pods = kube.kubectl("get", "pods", "-A", "-o", "name", check=False).stdout.split()
            if not tasks and not pods:
                break
            time.sleep(1)
        return ["pods drained"]

    def _remove_containers(self) -> list[str]:
        sock = self.paths.containerd_socket
        if not processes.running_pid(self.paths, "containerd"):
            return []
        removed = []
        for task in oci.ctr(sock, "tasks", "ls", "-q", check=False).stdout.split():
            oci.ctr(sock, "tasks", "kill", "-s", "SIGKILL", task, check=False)
        time.sleep(0.5)
        for task in oci.ctr(sock, "tasks", "ls", "-q", check=False).stdout.split():
            oci.ctr(sock, "tasks", "rm", "-f", task, check=False)
        for cid in oci.ctr(sock, "containers", "ls", "-q", check=False).stdout.split():
            if oci.ctr(sock, "containers", "rm", cid, check=False).returncode == 0:
                removed.append(f"container {cid[:12]}")
        return removed


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _tail(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _kubeconfig_home() -> Path:
    return Path(os.environ.get("KUBECONFIG", "").split(":")[0] or Path.home() / ".kube" / "config")


def merge_kubeconfig(source: Path, name: str) -> Path:
    """Merge the admin kubeconfig into the user's (~/.kube/config) as context ``name`` and select it."""
    target = _kubeconfig_home()
    src = yaml.safe_load(source.read_text())
    try:
        doc = yaml.safe_load(target.read_text()) or {}
    except FileNotFoundError:
        doc = {}
    doc.setdefault("apiVersion", "v1")
    doc.setdefault("kind", "Config")
    for key, entry in (("clusters", src["clusters"][0]), ("users", src["users"][0]), ("contexts", src["contexts"][0])):
        entry = dict(entry, name=name)
        if key == "contexts":
            entry["context"] = {"cluster": name, "user": name}
        doc[key] = [e for e in doc.get(key) or [] if e.get("name") != name] + [entry]
    doc["current-context"] = name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    target.chmod(0o600)
    return target


def unmerge_kubeconfig(name: str) -> None:
    target = _kubeconfig_home()
    try:
        doc = yaml.safe_load(target.read_text()) or {}
    except FileNotFoundError:
        return
    for key in ("clusters", "users", "contexts"):
        doc[key] = [e for e in doc.get(key) or [] if e.get("name") != name]
    if doc.get("current-context") == name:
        doc["current-context"] = ""
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
