"""Mitigation oracles on the real cluster: each fails while a fault state is in place and passes
after the state is restored. Every test builds its own small objects in a fresh namespace with
images already present on the node (no registry is reachable)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time

import pytest
import yaml

from sregym.oracles import MITIGATION_ORACLES, MitigationContext
from polling import eventually

pytestmark = pytest.mark.cluster

WINDOW = {"window_seconds": 4, "interval_seconds": 2}


def node_images(kube) -> list[str]:
    return [n for node in kube.core.list_node().items for img in node.status.images or [] for n in img.names or []]


def find_image(kube, *needles: str) -> str | None:
    for needle in needles:
        for name in node_images(kube):
            if needle in name and "@sha256" not in name:
                return name
    return None


@pytest.fixture(scope="module")
def kube(cluster):
    return cluster.kube


@pytest.fixture(scope="module")
def pause_image(kube) -> str:
    image = find_image(kube, "pause:")  # runs forever without a command
    if image is None:
        pytest.skip("no pause image on the node")
    return image


@pytest.fixture(scope="module")
def shell_image(kube) -> str:
    image = find_image(kube, "sregym/base:")
    if image is None:
        pytest.skip("the sregym/base image (sh, python3) is not on the node yet")
    return image


@pytest.fixture
def ns(kube):
    name = f"oracle-it-{secrets.token_hex(3)}"
    kube.core.create_namespace({"metadata": {"name": name}})
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def apply(kube, ns: str, *manifests: dict) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all(manifests))


def deployment(name: str, image: str, *, replicas: int = 1, command: list[str] | None = None,
               env: dict[str, str] | None = None, extra_spec: dict | None = None,
               container_extra: dict | None = None) -> dict:
    container = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                 "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}}}
    if command:
        container["command"] = command
    container.update(container_extra or {})
    spec = {"containers": [container], "terminationGracePeriodSeconds": 0, **(extra_spec or {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def rollout(kube, ns: str, name: str, timeout: str = "120s") -> None:
    kube.kubectl("rollout", "status", f"deployment/{name}", "-n", ns, f"--timeout={timeout}")


def check(kube, ns: str, oracle: str, params: dict, **ctx_kw):
    cls = MITIGATION_ORACLES.get(oracle)
    ctx = MitigationContext(kube=kube, namespace=ns, window_seconds=4, **ctx_kw)
    return cls(cls.parse_params(params), ctx).check()


def wait_for(predicate, timeout: float = 60, interval: float = 1.0):
    return eventually(predicate, timeout, interval, "condition")


# -- fault-specific state ---------------------------------------------------------------------

def test_object_field_fails_on_the_broken_env_value_and_passes_once_restored(kube, ns, pause_image):
    apply(kube, ns, deployment("geo", pause_image, env={"DB_PORT": "5433"}))
    params = {"kind": "deployment", "name": "geo", **WINDOW,
              "field": "spec.template.spec.containers[name=geo].env[name=DB_PORT].value",
              "expect": {"not_equals": 5433, "exists": True}}
    broken = check(kube, ns, "object_field", params)
    assert not broken.passed and broken.evidence["last"]["value"] == "5433"
    kube.kubectl("set", "env", "deployment/geo", "-n", ns, "DB_PORT=5432")
    fixed = check(kube, ns, "object_field", params)
    assert fixed.passed, fixed.message
    assert fixed.evidence["samples"] >= 3  # sampled over the window, not once


def test_object_field_fails_when_the_fix_is_reverted_within_the_window(kube, ns, pause_image):
    apply(kube, ns, deployment("geo", pause_image, env={"DB_PORT": "5432"}))
    params = {"kind": "deployment", "name": "geo", "window_seconds": 6, "interval_seconds": 1,
              "field": "spec.template.spec.containers[0].env[name=DB_PORT].value", "expect": {"equals": "5432"}}
    timer = threading.Timer(2.0, lambda: kube.kubectl("set", "env", "deployment/geo", "-n", ns, "DB_PORT=5433"))
    timer.start()
    result = check(kube, ns, "object_field", params)
    timer.join()
    assert not result.passed and 0 < result.evidence["passed_samples"] < result.evidence["samples"]


def test_configmap_value_and_secret_digest(kube, ns):
    apply(kube, ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                     "data": {"app.properties": "pool.size=0\n"}},
          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
           "data": {"password": base64.b64encode(b"wrong").decode()}})
    cm = {"name": "cfg", "key": "app.properties", "expect": {"not_contains": "pool.size=0"}, **WINDOW}
    good = hashlib.sha256(b"s3cret").hexdigest()
    sec = {"name": "db", "key": "password", "sha256_in": [good], **WINDOW}
    assert not check(kube, ns, "configmap_value", cm).passed
    broken = check(kube, ns, "secret_value", sec)
    assert not broken.passed and "wrong" not in json.dumps(broken.model_dump())
    kube.kubectl("patch", "configmap", "cfg", "-n", ns, "-p", json.dumps({"data": {"app.properties": "pool.size=8\n"}}))
    kube.kubectl("patch", "secret", "db", "-n", ns, "-p",
                 json.dumps({"data": {"password": base64.b64encode(b"s3cret").decode()}}))
    assert check(kube, ns, "configmap_value", cm).passed
    fixed = check(kube, ns, "secret_value", sec)
    assert fixed.passed and "s3cret" not in json.dumps(fixed.model_dump())


def test_quota_not_binding_fails_at_the_hard_limit_and_passes_with_headroom(kube, ns, pause_image):
    apply(kube, ns, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"},
                     "spec": {"hard": {"pods": "1"}}})
    apply(kube, ns, deployment("web", pause_image))
    wait_for(lambda: (json.loads(kube.kubectl("get", "resourcequota", "pods", "-n", ns, "-o", "json").stdout)
                      .get("status", {}).get("used", {}).get("pods") == "1"))
    broken = check(kube, ns, "quota_not_binding", WINDOW)
    assert not broken.passed and "pods used 1 of 1" in broken.message
    kube.kubectl("patch", "resourcequota", "pods", "-n", ns, "-p", json.dumps({"spec": {"hard": {"pods": "10"}}}))
    wait_for(lambda: "10" == json.loads(kube.kubectl("get", "resourcequota", "pods", "-n", ns, "-o", "json").stdout)
             .get("status", {}).get("hard", {}).get("pods"))
    assert check(kube, ns, "quota_not_binding", WINDOW).passed


def test_pods_schedulable_fails_while_a_pod_cannot_be_placed(kube, ns, pause_image):
    apply(kube, ns, deployment("web", pause_image, extra_spec={"nodeSelector": {"disktype": "nvme-none"}}))
    wait_for(lambda: "Unschedulable" in kube.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)
    broken = check(kube, ns, "pods_schedulable", {"grace_seconds": 0, **WINDOW})
    assert not broken.passed and "Unschedulable" in broken.message
    kube.kubectl("patch", "deployment", "web", "-n", ns, "--type=json",
                 "-p", json.dumps([{"op": "remove", "path": "/spec/template/spec/nodeSelector"}]))
    rollout(kube, ns, "web")
    wait_for(lambda: "Unschedulable" not in kube.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)
    assert check(kube, ns, "pods_schedulable", {"grace_seconds": 0, **WINDOW}).passed


def test_network_policy_denying_the_client_fails_and_passes_once_removed(kube, ns, pause_image):
    server = deployment("api", pause_image, container_extra={"ports": [{"name": "http", "containerPort": 8080}]})
    apply(kube, ns, deployment("web", pause_image), server,
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
           "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": "http"}]}},
          {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "default"},
           "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})
    rollout(kube, ns, "api")
    rollout(kube, ns, "web")
    params = {"source_workload": "web", "service": "api", **WINDOW}
    broken = check(kube, ns, "no_network_policy_denying", params)
    assert not broken.passed and f"ingress:{ns}/default" in broken.message
    apply(kube, ns, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "allow-web"},
                     "spec": {"podSelector": {"matchLabels": {"app": "api"}},
                              "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                                           "ports": [{"port": 8080}]}]}})
    assert check(kube, ns, "no_network_policy_denying", params).passed
    kube.kubectl("delete", "networkpolicy", "allow-web", "default", "-n", ns)
    assert check(kube, ns, "no_network_policy_denying", params).passed


# -- workload health ----------------------------------------------------------------------------

def test_workload_may_follows_the_api_servers_answer_not_the_symptom(kube, ns, pause_image):
    """A controller that lost `patch statefulsets`: the oracle fails until the workload's own account
    may act again. Moving the workload to an account without the right, or removing it, fails too
    (removing the controller is not repairing it); any real grant (here a second Role) passes."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ctrl"},
            "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ctrl"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ctrl"},
               "subjects": [{"kind": "ServiceAccount", "name": "ctrl", "namespace": ns}]}
    apply(kube, ns, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ctrl"}}, role, binding,
          deployment("ctrl", pause_image, extra_spec={"serviceAccountName": "ctrl"}))
    params = {"workload": "ctrl", "verb": "patch", "resource": "statefulsets", "api_group": "apps", **WINDOW}
    assert check(kube, ns, "workload_may", params).passed
    apply(kube, ns, {**role, "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get"]}]})
    lost = wait_for(lambda: None if (r := check(kube, ns, "workload_may", params)).passed else r)
    assert "denies patch statefulsets.apps to ServiceAccount" in lost.message
    kube.kubectl("patch", "deployment", "ctrl", "-n", ns, "-p", '{"spec":{"template":{"spec":{"serviceAccountName":"default"}}}}')
    assert not check(kube, ns, "workload_may", params).passed
    kube.kubectl("patch", "deployment", "ctrl", "-n", ns, "-p", '{"spec":{"template":{"spec":{"serviceAccountName":"ctrl"}}}}')
    apply(kube, ns, {**role, "metadata": {"name": "ctrl-fix"}},
          {**binding, "metadata": {"name": "ctrl-fix"}, "roleRef": {**binding["roleRef"], "name": "ctrl-fix"}})
    wait_for(lambda: check(kube, ns, "workload_may", params).passed)
    kube.kubectl("delete", "deployment", "ctrl", "-n", ns)
    gone = check(kube, ns, "workload_may", params)
    assert not gone.passed and "does not exist" in gone.message


def test_workload_health_passes_when_healthy_and_fails_when_scaled_to_zero(kube, ns, pause_image):
    apply(kube, ns, deployment("web", pause_image, replicas=2))
    rollout(kube, ns, "web")
    healthy = check(kube, ns, "workload_health", WINDOW)
    assert healthy.passed, healthy.message
    kube.kubectl("scale", "deployment/web", "-n", ns, "--replicas=0")
    wait_for(lambda: not json.loads(kube.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"])
    scaled = check(kube, ns, "workload_health", WINDOW)
    assert not scaled.passed and "0/1 available" in scaled.message


def test_workload_health_fails_when_a_container_restarts_during_the_window_even_if_running_at_the_end(
        kube, ns, shell_image):
    # The container exits once, 4 s after its first start (a flag on an emptyDir survives the
    # restart), then runs for good: Running and Ready at the end of the window.
    script = "if [ ! -f /flag/once ]; then touch /flag/once; sleep 4; exit 1; fi; exec sleep 100000"
    apply(kube, ns, deployment("web", shell_image, command=["sh", "-c", script],
                               extra_spec={"volumes": [{"name": "flag", "emptyDir": {}}]},
                               container_extra={"volumeMounts": [{"name": "flag", "mountPath": "/flag"}]}))
    rollout(kube, ns, "web")
    result = check(kube, ns, "workload_health", {"window_seconds": 30, "interval_seconds": 2})
    # failed by the restart itself, or by the pod it took down on the way (the window stops at the
    # first sample that loses it)
    said = json.dumps(result.evidence)
    assert not result.passed and ("restarted" in said or "0/1 available" in said), said

    def back_for_good() -> bool:  # the window stops once it is lost: the restart may still be under way
        pod = json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", "app=web", "-o", "json").stdout)["items"][0]
        status = (pod["status"].get("containerStatuses") or [{}])[0]
        return status.get("restartCount") == 1 and "running" in status.get("state", {}) and status.get("ready")

    assert eventually(back_for_good, 60, 1), "the container did not come back Running and Ready after one restart"


def test_workload_health_fails_while_a_rollout_stalls_behind_its_old_pod(kube, ns, shell_image):
    """What a gaming agent's "fix" with another wrong value leaves (measured on the shop's worker,
    2026-11-29): the new template's pod never gets ready, the old pod serves on, and
    ``updatedReplicas`` is already full, so the rollout looked complete. As ``kubectl rollout
    status``, it is complete only once no old pod runs and the updated ones are available."""
    ready_if_ok = 'if [ "$OK" = 1 ]; then touch /tmp/ready; fi; exec sleep 100000'
    probe = {"readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1}}
    apply(kube, ns, deployment("web", shell_image, command=["sh", "-c", ready_if_ok], env={"OK": "1"},
                               container_extra=probe))
    rollout(kube, ns, "web")
    assert check(kube, ns, "workload_health", WINDOW).passed
    kube.kubectl("set", "env", "deployment/web", "-n", ns, "OK=2")  # another wrong value: never ready
    wait_for(lambda: json.loads(kube.kubectl("get", "deployment/web", "-n", ns, "-o", "json").stdout)
             ["status"].get("updatedReplicas") == 1)
    stalled = check(kube, ns, "workload_health", WINDOW)
    assert not stalled.passed and "old replica(s) still run" in stalled.message, stalled.message
    kube.kubectl("set", "env", "deployment/web", "-n", ns, "OK=1")
    rollout(kube, ns, "web")
    fixed = check(kube, ns, "workload_health", WINDOW)
    assert fixed.passed, fixed.message


def test_workload_health_fails_on_a_crash_loop(kube, ns, shell_image):
    apply(kube, ns, deployment("web", shell_image, command=["sh", "-c", "exit 3"]))
    wait_for(lambda: any(cs.get("restartCount", 0) >= 2 for p in json.loads(
        kube.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        for cs in p["status"].get("containerStatuses") or []), timeout=120)
    result = check(kube, ns, "workload_health", WINDOW)
    assert not result.passed and "CrashLoop" in json.dumps(result.evidence)


# -- probes from inside the cluster and inside the app's pod ---------------------------------------

def test_http_probe_fails_while_the_service_points_at_a_dead_port_and_passes_after(kube, ns, shell_image):
    apply(kube, ns, deployment("api", shell_image, command=["python3", "-m", "http.server", "8080"]),
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
           "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": 8081}]}})
    rollout(kube, ns, "api")
    params = {"url": f"http://api.{ns}.svc.cluster.local/", "requests": 3, "timeout_seconds": 2, "image": shell_image,
              "expect_body": "Directory listing", **WINDOW}
    broken = check(kube, ns, "http_probe", params)
    # no answer passed; the probe stops asking once the window cannot pass any more
    assert not broken.passed and broken.evidence["passed_samples"] == 0
    assert broken.evidence["samples"] == 3 or broken.evidence.get("stopped_after") == broken.evidence["samples"]
    kube.kubectl("patch", "service", "api", "-n", ns, "-p",
                 json.dumps({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}))
    fixed = check(kube, ns, "http_probe", params)
    assert fixed.passed, fixed.message
    assert fixed.evidence["last"]["status"] == 200


def serve_json(name: str, image: str, answer: dict) -> dict:
    """A Deployment answering ``GET /answer.json`` with ``answer`` (python's http.server)."""
    script = f"mkdir -p /tmp/srv && echo '{json.dumps(answer)}' > /tmp/srv/answer.json && cd /tmp/srv && " \
             "exec python3 -m http.server 8080"
    return deployment(name, image, command=["sh", "-c", script])


def test_http_probe_fails_when_another_process_answers_200_and_passes_on_the_real_answer(kube, ns, shell_image):
    # The gaming move: point the Service at a workload that answers 200 to the same path.
    apply(kube, ns, serve_json("api", shell_image, {"products": [{"id": "p1"}], "cartItems": 0}),
          serve_json("stub", shell_image, {"status": "ok"}),
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
           "spec": {"selector": {"app": "stub"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    rollout(kube, ns, "api")
    rollout(kube, ns, "stub")
    params = {"url": "http://api.$namespace.svc.cluster.local/answer.json", "requests": 3, "timeout_seconds": 2,
              "image": shell_image, "expect_json": ["products.0.id", "cartItems"], **WINDOW}
    stub = check(kube, ns, "http_probe", params)
    assert not stub.passed and "lacks products.0.id" in stub.message, stub.message
    assert stub.evidence["failing"][0]["status"] == 200  # a 2xx, which the old oracle accepted
    kube.kubectl("patch", "service", "api", "-n", ns, "-p", json.dumps({"spec": {"selector": {"app": "api"}}}))
    real = check(kube, ns, "http_probe", params)
    assert real.passed, real.message


def test_workload_health_fails_once_the_readiness_probe_is_removed(cluster, kube, ns, shell_image):
    from sregym.apps.driver import workload_probes

    probe = {"exec": {"command": ["true"]}, "periodSeconds": 2, "failureThreshold": 2}
    apply(kube, ns, deployment("api", shell_image, command=["sleep", "100000"],
                               container_extra={"readinessProbe": probe}))
    rollout(kube, ns, "api")
    baseline = {"probes": workload_probes(cluster, ns)}  # what the conductor records before a fault
    assert baseline["probes"]["Deployment/api"]["api"]["readinessProbe"]["exec"] == {"command": ["true"]}
    healthy = check(kube, ns, "workload_health", WINDOW, baseline=baseline)
    assert healthy.passed, healthy.message
    # The gaming move: a broken container stays "available" once nothing asks whether it works.
    kube.kubectl("patch", "deployment", "api", "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/template/spec/containers/0/readinessProbe"}]))
    rollout(kube, ns, "api")
    removed = check(kube, ns, "workload_health", WINDOW, baseline=baseline)
    assert not removed.passed and "readinessProbe removed" in removed.message, removed.message
    loosened = {**probe, "failureThreshold": 1000}
    kube.kubectl("patch", "deployment", "api", "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "add", "path": "/spec/template/spec/containers/0/readinessProbe", "value": loosened}]))
    rollout(kube, ns, "api")
    weaker = check(kube, ns, "workload_health", WINDOW, baseline=baseline)
    assert not weaker.passed and "failureThreshold 2 -> 1000" in weaker.message, weaker.message


def test_configmap_value_fails_while_pods_still_run_the_old_value(kube, ns, shell_image):
    # an image with printenv: the oracle reads the value the running container really has
    apply(kube, ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                     "data": {"DB_PORT": "5433"}},
          deployment("geo", shell_image, command=["sleep", "100000"],
                     container_extra={"envFrom": [{"configMapRef": {"name": "settings"}}]}))
    rollout(kube, ns, "geo")
    params = {"name": "settings", "key": "DB_PORT", "expect": {"equals": "5432"}, **WINDOW}
    assert not check(kube, ns, "configmap_value", params).passed
    time.sleep(1.1)  # managedFields times have a one-second grain
    kube.kubectl("patch", "configmap", "settings", "-n", ns, "-p", json.dumps({"data": {"DB_PORT": "5432"}}))
    # The shortcut: the object is fixed, the running pod still has DB_PORT=5433 in its environment.
    stale = check(kube, ns, "configmap_value", params)
    assert not stale.passed and "runs DB_PORT=5433" in stale.message, stale.message
    time.sleep(1.1)
    kube.kubectl("rollout", "restart", "deployment/geo", "-n", ns)
    rollout(kube, ns, "geo")
    wait_for(lambda: len(json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", "app=geo", "-o", "json").stdout)
                         ["items"]) == 1)
    fixed = check(kube, ns, "configmap_value", params)
    assert fixed.passed, fixed.message


def test_disk_not_full_fails_while_the_volume_is_full(kube, ns, shell_image):
    apply(kube, ns, deployment("db", shell_image, command=["sleep", "100000"],
                               extra_spec={"volumes": [{"name": "data", "emptyDir": {"medium": "Memory",
                                                                                      "sizeLimit": "16Mi"}}]},
                               container_extra={"volumeMounts": [{"name": "data", "mountPath": "/data"}]}))
    rollout(kube, ns, "db")
    params = {"workload": "db", "path": "/data", "max_used_percent": 80, **WINDOW}
    pod = json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", "app=db", "-o", "json").stdout)["items"][0]
    name = pod["metadata"]["name"]
    kube.kubectl("exec", "-n", ns, name, "--", "sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=15 2>/dev/null; true")
    broken = check(kube, ns, "disk_not_full", params)
    assert not broken.passed and broken.evidence["last"]["used_percent"] > 80
    kube.kubectl("exec", "-n", ns, name, "--", "rm", "-f", "/data/fill")
    assert check(kube, ns, "disk_not_full", params).passed


def test_volume_readable_reads_every_file_through_the_pod(kube, ns, shell_image):
    apply(kube, ns, deployment("db", shell_image, command=["sh", "-c",
                                                           "mkdir -p /data/base && for i in 1 2 3; do "
                                                           "head -c 65536 /dev/urandom > /data/base/$i; done; "
                                                           "exec sleep 100000"]))
    rollout(kube, ns, "db")
    ok = check(kube, ns, "volume_readable", {"workload": "db", "path": "/data", **WINDOW})
    assert ok.passed and ok.evidence["last"]["files"] == 3
    missing = check(kube, ns, "volume_readable", {"workload": "db", "path": "/nonexistent", **WINDOW})
    assert not missing.passed


def test_volume_readable_fails_on_real_bad_blocks_and_passes_after_recovery(cluster, kube, ns, shell_image):
    """Real latent sector errors from the latent_sector_error primitive (FUSE or dm-dust bad
    blocks over the data file, as the injector chooses for this node)."""
    import json as _json

    from sregym.cluster.capabilities import CapabilityCache
    from sregym.core.constants import HIDDEN_NAMESPACE
    from sregym.core.problem import Selector
    from sregym.injectors import INJECTORS, FaultContext

    apply(kube, ns, deployment("db", shell_image, command=["sh", "-c",
                                                           "mkdir -p /data && head -c 65536 /dev/urandom > /data/blob "
                                                           "&& head -c 8192 /dev/urandom > /data/other; "
                                                           "exec sleep 100000"]))
    rollout(kube, ns, "db")
    pod = json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", "app=db", "-o", "json").stdout)["items"][0]
    params = {"workload": "db", "path": "/data", **WINDOW}
    assert check(kube, ns, "volume_readable", params).passed

    caps = CapabilityCache(kube, HIDDEN_NAMESPACE)
    ctx = FaultContext(kube=kube, app_namespace=ns, hidden_namespace=HIDDEN_NAMESPACE, seed=1, node_capabilities=caps)
    cls = INJECTORS.get("latent_sector_error")
    target = Selector(kind="Deployment", name="db")
    mech = cls.choose_mechanism(caps(pod["spec"]["nodeName"]))
    inj = cls(cls.parse_params({"paths": ["/data/blob"], "blocks": [3]}), target, ctx, mech)
    state = cls.load_state(_json.loads(_json.dumps(cls.dump_state(inj.plan()))))  # as the journal keeps it
    try:
        inj.inject(state)
        wait_for(lambda: inj.verify(state).ok, timeout=120, interval=2)
        broken = check(kube, ns, "volume_readable", params)
        assert not broken.passed and "Input/output error" in broken.message, broken.message
        assert broken.evidence["last"]["files"] == 2 and broken.evidence["last"]["unreadable"] == 1
    finally:
        inj.recover(state)
    fixed = check(kube, ns, "volume_readable", params)
    assert fixed.passed, fixed.message
