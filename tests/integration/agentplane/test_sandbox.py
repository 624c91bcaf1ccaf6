"""Red team from inside the sandbox: act as a command agent in its pod and try to reach the conductor's
world. Each channel must be closed: the journal and admin kubeconfig under /var/lib/sregym, the
repository's problems, the host's processes (`ps` must not list `sregym run` or the node's
components), the API server other than at the endpoint handed over, Prometheus's own API (the
grader's view), the root file system. The agent must still do its job: call the tools and submit
through MCP, and its record shows it. A conductor killed mid-run leaves no agent after
`sregym cleanup`.

The workbench image is built once (cached by input hash; `sregym images build` makes it too).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import anyio
import pytest
from kubernetes.client.exceptions import ApiException

from agentplane_cluster_fixtures import ensure_namespace, stack, workbench  # noqa: F401 - fixtures
from sregym.agentplane.agents.command import CommandAgent
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.agentplane.sandbox import NAMESPACE_PREFIX, Sandbox, api_server_endpoint, local_address_for_pods
from sregym.apps.driver import DeployedApp
from sregym.cluster.agent_access import revoke_agent_access
from sregym.cluster.local.processes import running
from sregym.conductor.agent import run_agent
from sregym.conductor.cleanup import cleanup_all
from sregym.conductor.journal import open_journals
from sregym.core.problem import Budgets

from live import agent_kubeconfig_for
from polling import eventually

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]

# What the agent in the pod tries. Each probe prints "open" when it got through, or why it did not.
ATTACKS = textwrap.dedent(r"""
    import glob, json, os, socket, sys, urllib.request, concurrent.futures as cf
    targets = json.loads(sys.argv[1])
    out = {}
    def read(path):
        try:
            if os.path.isdir(path):
                return "open: " + ",".join(os.listdir(path))[:200]
            with open(path, "rb") as f:
                return "open: " + f.read(200).decode(errors="replace")
        except OSError as e:
            return type(e).__name__
    for path in ("/var/lib/sregym", "/var/lib/sregym/journal", "/var/lib/sregym/clusters/default/admin.kubeconfig",
                 "/root/.kube/config", "/var/run/secrets/kubernetes.io/serviceaccount/token", "/work", "/host"):
        out["read " + path] = read(path)
    found = []
    for root, dirs, files in os.walk("/"):
        if root.startswith(("/proc", "/sys", "/dev")):
            dirs[:] = []
            continue
        if os.path.basename(root) in ("problems", "injectors", "oracles", "conductor", "journal"):
            found.append(root)
    out["repository folders"] = ("open: " + ",".join(found)) if found else "none"
    cmdlines = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                cmdlines.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
            except OSError:
                pass
    seen = [c for c in cmdlines if any(w in c for w in ("sregym", "kubelet", "kube-apiserver", "containerd", "etcd",
                                                          "prometheus", "sleep 600"))]
    out["host processes"] = ("open: " + " | ".join(seen)[:300]) if seen else f"none of {len(cmdlines)}"
    def connect(hostport):
        host, port = hostport.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            return "open"
        except OSError as e:
            return type(e).__name__
    def http(url):
        try:
            return "open: " + urllib.request.urlopen(url, timeout=3).read(200).decode(errors="replace")
        except Exception as e:
            return type(e).__name__
    with cf.ThreadPoolExecutor(16) as pool:
        conns = {f"connect {t}": pool.submit(connect, t) for t in targets["connect"]}
        gets = {f"get {u}": pool.submit(http, u) for u in targets["http"]}
        out.update({k: f.result() for k, f in {**conns, **gets}.items()})
    for path in ("/usr/local/bin/kubectl", "/opt/workbench/sregym/agentplane/server.py", "/etc/passwd", "/x"):
        try:
            open(path, "a").close()
            out["write " + path] = "open"
        except OSError as e:
            out["write " + path] = type(e).__name__
    out["uid"] = os.getuid()
    out["home writable"] = os.access(os.environ["HOME"], os.W_OK)
    out["stdin is the prompt"] = sys.stdin.read() == open(os.environ["SREGYM_PROMPT_FILE"]).read()
    import anyio, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    async def main():
        headers = {"Authorization": "Bearer " + os.environ["SREGYM_MCP_TOKEN"]}  # the run's own tools only
        async with httpx2.AsyncClient(headers=headers) as http:
          async with Client(streamable_http_client(os.environ["SREGYM_MCP_URL"], http_client=http)) as c:
              r = await c.call_tool("kubectl", {"command": ["get", "pods", "-n", os.environ["SREGYM_NAMESPACE"]]})
              out["mcp kubectl"] = "error" if r.is_error else "ok"
              await c.call_tool("submit_diagnosis", {"text": json.dumps(out)})
              await c.call_tool("submit_mitigation", {})
    anyio.run(main)
    print(json.dumps(out))
""")


@pytest.fixture()
def app_namespace(cluster):
    name = f"sbx-{uuid.uuid4().hex[:6]}"
    ensure_namespace(cluster.kube.core, name)
    yield name
    cluster.kube.core.delete_namespace(name)


def sandbox_namespaces(kube) -> list[str]:
    return [n.metadata.name for n in kube.core.list_namespace().items if n.metadata.name.startswith(NAMESPACE_PREFIX)]


def test_the_command_agent_in_its_pod_reaches_nothing_of_the_conductor_and_submits_through_mcp(
        cluster, workbench, stack, app_namespace) -> None:
    kube = cluster.kube
    node = local_address_for_pods(kube)
    prom = kube.core.read_namespaced_service("prometheus", "observability")
    api = api_server_endpoint(kube)
    targets = {
        "connect": [f"{node}:10250", f"{node}:2379", f"{node}:9100", f"{prom.spec.cluster_ip}:9090", f"{node}:30090",
                    f"{node}:22"],
        "http": [f"{stack['prometheus']}/api/v1/targets?state=dropped",
                 f"http://{prom.spec.cluster_ip}:9090/api/v1/targets", f"{stack['logs']}/query?namespace=kube-system"],
    }
    journaled: list[str] = []
    runner = CommandAgent(["python3", "-c", ATTACKS, json.dumps(targets)], timeout=120)
    app = DeployedApp(name="web", namespace=app_namespace, prometheus_url=stack["prometheus"],
                      traces_url=stack["traces"], logs_url=stack["logs"])
    started = time.monotonic()
    trajectory = anyio.run(lambda: run_agent(
        agent="command", runner=runner, cluster=cluster, app=app, alert="web answers slowly", budgets=Budgets(
            steps=20, seconds=150), seed=1, forbidden_words=["nothing-to-hide"], on_sandbox=journaled.append))
    elapsed = time.monotonic() - started
    diagnosis = trajectory.submission("diagnosis")
    assert diagnosis is not None, f"the agent did not submit through MCP: {trajectory.stop_reason}"
    seen = json.loads(diagnosis.text)
    opened = {k: v for k, v in seen.items() if isinstance(v, str) and v.startswith("open")}
    assert not opened, f"the sandboxed agent got through: {opened}"
    assert seen["uid"] != 0 and seen["home writable"] and seen["stdin is the prompt"]
    assert seen["mcp kubectl"] == "ok"
    assert trajectory.submission("mitigation") is not None and trajectory.stop_reason == "submitted"
    assert [c.tool for c in trajectory.tool_calls][:1] == ["kubectl"]
    # the sandbox was journaled before it existed, and is gone with the agent phase
    assert journaled and journaled[0].startswith(NAMESPACE_PREFIX)
    assert journaled[0] not in sandbox_namespaces(kube) or not kube.core.list_namespaced_pod(journaled[0]).items
    assert api.port and elapsed < 120, f"the agent phase took {elapsed:.0f}s"


PROBE_API = textwrap.dedent(r"""
    import json, os, socket, subprocess, sys
    out = {}
    for hostport in sys.argv[1:]:
        host, port = hostport.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            out[hostport] = "open"
        except OSError as e:
            out[hostport] = type(e).__name__
    kubectl = subprocess.run(["kubectl", "get", "pods", "-n", os.environ["SREGYM_NAMESPACE"], "-o", "name"],
                             capture_output=True, text=True)
    out["kubectl through the given endpoint"] = kubectl.returncode
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(3)  # so the conductor returns the output's tail with the exit code (as it does for any failure)
""")


def test_the_sandbox_reaches_the_api_only_at_the_endpoint_its_kubeconfig_names(
        cluster, workbench, app_namespace, tmp_path) -> None:
    """The kubeconfig names the agent's API proxy (on the node's address): the sandbox reaches it,
    kubectl works through it, and the API server itself is out of reach at every address."""
    kube = cluster.kube
    api = api_server_endpoint(kube)
    with agent_kubeconfig_for(cluster, app_namespace, tmp_path, observability_namespace=None) as kubeconfig:
        sandbox = Sandbox(kube, kubeconfig.read_text())
        given = sandbox_endpoint(kubeconfig)
        direct = [f"{api.host}:{api.port}", "10.96.0.1:443", given]
        runner = CommandAgent(["python3", "-c", PROBE_API, *direct], timeout=60)

        async def go():
            async with AgentPlane(kubeconfig, app_namespace, AgentBudgets(steps=5, seconds=90), sandbox=sandbox) as plane:
                # Pod Security `restricted` refuses anything less hardened in the sandbox namespace
                privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escalate"}, "spec": {
                    "containers": [{"name": "c", "image": sandbox.image, "securityContext": {"privileged": True}}]}}
                with pytest.raises(ApiException) as refused:
                    kube.core.create_namespaced_pod(sandbox.namespace, privileged)
                assert refused.value.status == 403 and "restricted" in (refused.value.body or "")
                result = await plane.run_agent(runner, plane.task(prompt="probe", seed=1))
                return result, sandbox.namespace

        result, namespace = anyio.run(go)
    assert result.stop_reason == "error" and "exited with 3" in (result.error or ""), result
    seen = json.loads(result.error.split("RESULT ", 1)[1].splitlines()[0])
    assert seen.pop(given) == "open" and seen.pop("kubectl through the given endpoint") == 0
    assert all(v != "open" for v in seen.values()), f"the API server was reached directly: {seen}"
    assert namespace not in sandbox_namespaces(kube) or not kube.core.list_namespaced_pod(namespace).items


def sandbox_endpoint(kubeconfig: Path) -> str:
    """HOST:PORT of the server a kubeconfig names."""
    import yaml
    from urllib.parse import urlsplit

    url = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    return f"{url.hostname}:{url.port or 443}"


CONDUCTOR = textwrap.dedent(r"""
    import sys
    from pathlib import Path
    import anyio
    from sregym.agentplane.agents.command import CommandAgent
    from sregym.apps.driver import DeployedApp
    from sregym.cluster.handle import ClusterHandle
    from sregym.conductor.agent import run_agent
    from sregym.conductor.journal import Journal, RunHeader
    from sregym.core.problem import Budgets
    kubeconfig, context, namespace = sys.argv[1], sys.argv[2] or None, sys.argv[3]
    cluster = ClusterHandle("default", "existing", Path(kubeconfig), context)
    journal = Journal("r-killed")
    journal.start(RunHeader(run_id="r-killed", problem_id="p", kubeconfig=kubeconfig, context=context))
    anyio.run(lambda: run_agent(agent="command", runner=CommandAgent(["sleep", "600"]), cluster=cluster,
                                app=DeployedApp(name="web", namespace=namespace), alert="web is slow",
                                budgets=Budgets(steps=5, seconds=600), seed=1, forbidden_words=[],
                                on_server=journal.process, on_sandbox=journal.sandbox))
""")


def test_a_killed_conductor_leaves_no_agent_running_after_cleanup(cluster, workbench, app_namespace,
                                                                   tmp_path) -> None:
    kube = cluster.kube
    env = {**os.environ, "SREGYM_STATE": str(tmp_path), "PYTHONPATH": str(REPO)}
    conductor = subprocess.Popen([sys.executable, "-c", CONDUCTOR, str(cluster.kubeconfig), cluster.context or "",
                                  app_namespace], env=env, cwd=REPO, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def agent_running() -> str | None:
            journals = open_journals(tmp_path / "journal")
            for namespace in journals[0].sandboxes if journals else []:
                try:
                    pod = kube.core.read_namespaced_pod("sre-agent", namespace)
                except ApiException:
                    return None
                return namespace if pod.status.phase == "Running" else None
            assert conductor.poll() is None, conductor.stderr.read().decode()[-2000:]
            return None

        namespace = eventually(agent_running, 120, 1)
        assert namespace, "the command agent's pod never ran"
        proxies = open_journals(tmp_path / "journal")[0].processes
        assert proxies, "the conductor journals its helper processes (the API proxy) so cleanup can stop them"
    finally:
        os.killpg(conductor.pid, signal.SIGKILL)  # the conductor's own group: started in a new session
        conductor.wait()
    assert kube.core.list_namespaced_pod(namespace).items, "the pods should outlive a killed conductor until cleanup"
    cleanup = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=180)
    assert cleanup.returncode == 0, cleanup.stderr
    assert f"sandbox {namespace}" in " ".join(cleanup.stderr.split())  # however the console wrapped it
    try:
        left = kube.core.list_namespaced_pod(namespace).items
    except ApiException as e:
        left = [] if e.status == 404 else [e]
    assert not left, [p.metadata.name for p in left]
    assert not open_journals(tmp_path / "journal")
    # the conductor's helpers (the API proxy runs in a session of its own) were stopped by cleanup too
    # (a killed orphan is a zombie until PID 1 reaps it, seconds later here: a zombie does not run)
    def helpers_running() -> list[int]:
        return [pid for pid in proxies if running(pid)]

    eventually(lambda: not helpers_running(), 10, 0.5)
    helpers = helpers_running()
    assert not helpers, f"cleanup left the killed conductor's helpers running: {helpers}"
    revoke_agent_access(kube, app_namespace)  # the killed run had no fault intents naming it (a real run has)


def test_in_process_agents_reach_the_tool_server_pod_and_other_namespaces_do_not(
        cluster, workbench, app_namespace, tmp_path) -> None:
    """noop runs in the conductor's process and submits through the pod; a pod of the app namespace
    (where the agent may exec) cannot reach the tool server: ingress only from the node and the sandbox."""
    from sregym.agentplane.agents import AGENTS
    from sregym.cluster.images import image_ref

    kube = cluster.kube
    access = agent_kubeconfig_for(cluster, app_namespace, tmp_path, observability_namespace=None)
    kubeconfig = access.__enter__()
    sandbox = Sandbox(kube, kubeconfig.read_text())
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
            "name": "c", "image": image_ref("base"), "imagePullPolicy": "Never",
            "command": ["python3", "-c", "import socket, sys, time\nfor _ in range(20):\n  try:\n"
                        "    socket.create_connection((sys.argv[1], 8080), timeout=2).close(); print('open'); break\n"
                        "  except OSError as e:\n    print(type(e).__name__, flush=True); time.sleep(0.5)\n"]}]}}

    async def go():
        async with AgentPlane(kubeconfig, app_namespace, AgentBudgets(steps=5, seconds=60), sandbox=sandbox) as plane:
            ip = plane.mcp_url.split("//", 1)[1].split(":", 1)[0]
            probe["spec"]["containers"][0]["command"].append(ip)
            kube.core.create_namespaced_pod(app_namespace, probe)
            result = await plane.run_agent(AGENTS.get("noop")(), plane.task(prompt="p", seed=1))
            done = await anyio.to_thread.run_sync(lambda: eventually(
                lambda: kube.core.read_namespaced_pod("probe", app_namespace).status.phase in ("Succeeded", "Failed"),
                60, 1))
            return plane.trajectory(result), done

    try:
        trajectory, done = anyio.run(go)
    finally:
        access.__exit__(None, None, None)
    assert trajectory.submission("mitigation") is not None and trajectory.stop_reason == "submitted"
    assert done, "the probe pod did not finish"
    log = kube.core.read_namespaced_pod_log("probe", app_namespace)
    assert "open" not in log.split(), f"a pod of the app namespace reached the tool server: {log}"
    assert log.strip(), "the probe printed nothing"
