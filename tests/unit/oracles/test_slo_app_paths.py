"""A stand-in that computes right answers, put anywhere in the app, is not the app.

The entry path (``test_slo_entry_path.py``) and the load generator's answer checks closed the stubs
at the entry and the fail-open behind the broken component. Left: a stand-in that answers *right*
behind a component that is not the entry. The cheapest one is the app's own code: a copy of the
faulty component's Deployment under another name (same image, command and settings) is a
stand-in that computes right answers, and a fault bound to the component's own pods (a stress
process started with every geo pod, a syscall filter on its containers) does not follow it. The
agent may create Deployments and edit Services and ConfigMaps, so it can send the callers' requests
to the copy three ways: the copy wearing the component's labels behind its Service, the Service's
selector pointed at the copy, or the callers' address setting (``GEO_ADDR`` in ``hotel-settings``,
an ``env`` entry in a caller's container) pointed at a Service of the copy's or at a pod's IP.

So the baseline records the path of every Service of the app and the wiring (which of the app's
Services or pods each setting names), and every slo sample compares the live ones with them.
"""

from __future__ import annotations

import copy

import oracles.slo as slo_module
from oracles.slo import SloOracle, SloParams
from sregym.cluster.entry_path import app_path_changes, app_paths
from sregym.oracles import MitigationContext

NS = "hotel"
IMAGE = "sregym/hotel:latest"
COMMAND = ["python3", "-m", "hotel"]


def labels(name: str) -> dict:
    return {"app.kubernetes.io/instance": "hotel-reservation", "app.kubernetes.io/name": name}


def service(name: str, selector: dict | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {"selector": selector or labels(name), "ports": [
        {"name": "http", "port": 8080, "protocol": "TCP", "targetPort": "http"}]}}


def deployment(name: str, pod_labels: dict | None = None, env: list[dict] | None = None,
               image: str = IMAGE) -> dict:
    container = {"name": name, "image": image, "command": COMMAND, "envFrom": [{"configMapRef": {"name": "hotel-settings"}}],
                 "env": [{"name": "SERVICE_NAME", "value": name}, *(env or [])]}
    pod_labels = pod_labels or labels(name)
    return {"kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": pod_labels},
                     "template": {"metadata": {"labels": pod_labels}, "spec": {"containers": [container]}}}}


def pod(name: str, owner: str, pod_labels: dict, ip: str, image: str = IMAGE, container: str = "") -> dict:
    return {"metadata": {"name": name, "labels": pod_labels,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-7c", "controller": True}]},
            "spec": {"containers": [{"name": container or owner, "image": image, "command": COMMAND}]},
            "status": {"podIP": ip}}


def replica_set(owner: str) -> dict:
    return {"metadata": {"name": f"{owner}-7c", "ownerReferences": [
        {"kind": "Deployment", "name": owner, "controller": True}]}}


def endpoint_slice(service_name: str, *pods: str) -> dict:
    return {"metadata": {"labels": {"kubernetes.io/service-name": service_name}},
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": p}} for p in pods],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


SETTINGS = {"FRONTEND_ADDR": "frontend:8080", "SEARCH_ADDR": "search:8080", "GEO_ADDR": "geo:8080",
            "DB_HOST": "hotel-db", "DB_PORT": "5432", "CALL_TIMEOUT_SECONDS": "2", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
            "http://jaeger-collector.observability.svc:4318/v1/traces"}


def world() -> dict:
    """frontend -> search -> geo, each a Deployment behind its Service, wired by hotel-settings."""
    names = ("frontend", "search", "geo")
    return {"services": [service(n) for n in names],
            "slices": [endpoint_slice(n, f"{n}-7c-a") for n in names],
            "pods": [pod(f"{n}-7c-a", n, labels(n), f"10.0.0.{i}") for i, n in enumerate(names, 1)],
            "replica_sets": [replica_set(n) for n in names],
            "workloads": [deployment(n) for n in names],
            "configmaps": [{"metadata": {"name": "hotel-settings"}, "data": dict(SETTINGS)},
                           {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "-----BEGIN"}}]}


def paths(w: dict) -> dict:
    return app_paths(w["services"], w["slices"], w["pods"], w["replica_sets"], w["workloads"], w["configmaps"],
                     namespace=NS)


BASELINE = paths(world())


def with_clone(w: dict, pod_labels: dict, service_too: bool = False) -> dict:
    """The agent's copy of geo: geo's own Deployment under another name (same image, command and
    settings, so its answers are geo's), optionally with a Service of its own."""
    w = copy.deepcopy(w)
    w["workloads"].append(deployment("geo-clone", pod_labels))
    w["replica_sets"].append(replica_set("geo-clone"))
    w["pods"].append(pod("geo-clone-7c-a", "geo-clone", pod_labels, "10.0.0.9", container="geo-clone"))
    if service_too:
        w["services"].append(service("geo-clone", pod_labels))
        w["slices"].append(endpoint_slice("geo-clone", "geo-clone-7c-a"))
    return w


def test_the_baseline_records_every_service_and_the_wiring():
    assert sorted(BASELINE["services"]) == ["frontend", "geo", "search"]
    assert BASELINE["services"]["geo"]["backends"] == {"Deployment/geo": {"geo": {
        "image": IMAGE, "command": COMMAND, "args": None}}}
    assert BASELINE["wiring"]["Deployment/search/search env GEO_ADDR"] == ["geo:8080"]  # through envFrom
    assert "Deployment/search/search env CALL_TIMEOUT_SECONDS" not in BASELINE["wiring"]  # names nothing
    assert BASELINE["wiring"]["Deployment/search/search env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == [
        "jaeger-collector.observability.svc:4318"]  # another namespace's Service is written as it is
    assert app_path_changes(BASELINE, BASELINE) == []


def test_a_copy_of_the_faulty_component_wearing_its_labels_behind_its_service_is_a_change():
    w = with_clone(world(), labels("geo"))
    w["slices"][2] = endpoint_slice("geo", "geo-clone-7c-a")  # geo scaled to 0: only the copy answers
    assert app_path_changes(BASELINE, paths(w)) == [
        "Service geo sends requests to Deployment/geo-clone, which did not answer it at the baseline"]


def test_the_faulty_components_service_pointed_at_a_copy_is_a_change():
    w = with_clone(world(), {"app.kubernetes.io/name": "geo-clone"})
    w["services"][2] = service("geo", {"app.kubernetes.io/name": "geo-clone"})
    w["slices"][2] = endpoint_slice("geo", "geo-clone-7c-a")
    changes = app_path_changes(BASELINE, paths(w))
    assert any(c.startswith("Service geo selects") for c in changes), changes


def test_the_callers_setting_pointed_at_a_service_of_the_copy_is_a_change():
    w = with_clone(world(), {"app.kubernetes.io/name": "geo-clone"}, service_too=True)
    w["configmaps"][0]["data"]["GEO_ADDR"] = "geo-clone:8080"
    assert app_path_changes(BASELINE, paths(w)) == [
        "env GEO_ADDR of Deployment/frontend/frontend, Deployment/geo/geo, Deployment/search/search "
        "names geo-clone:8080 (at the baseline geo:8080)"]


def test_a_callers_env_entry_that_overrides_the_setting_is_a_change():
    """``env`` wins over ``envFrom``: the ConfigMap left alone, search's own container told another address."""
    w = with_clone(world(), {"app.kubernetes.io/name": "geo-clone"}, service_too=True)
    w["workloads"][1] = deployment("search", env=[{"name": "GEO_ADDR", "value": "http://geo-clone.hotel.svc:8080"}])
    assert app_path_changes(BASELINE, paths(w)) == [
        "env GEO_ADDR of Deployment/search/search names geo-clone:8080 (at the baseline geo:8080)"]


def test_a_setting_pointed_at_a_pods_ip_is_a_change():
    """A stub exec'd beside geo's own process, on a spare port, reached by the pod's IP: no Service
    changes at all."""
    w = world()
    w["configmaps"][0]["data"]["GEO_ADDR"] = "10.0.0.3:18080"
    assert app_path_changes(BASELINE, paths(w)) == [
        "env GEO_ADDR of Deployment/frontend/frontend, Deployment/geo/geo, Deployment/search/search "
        "names 10.0.0.3:18080 (at the baseline geo:8080)"]


def test_a_stub_exec_d_beside_the_caller_and_named_as_localhost_is_a_change():
    """The stand-in started inside search's own pod, GEO_ADDR pointed at it on localhost: no Service
    of the app is named at all."""
    w = world()
    w["workloads"][1] = deployment("search", env=[{"name": "GEO_ADDR", "value": "localhost:18080"}])
    assert app_path_changes(BASELINE, paths(w)) == [
        "env GEO_ADDR of Deployment/search/search names localhost:18080 (at the baseline geo:8080)"]


def test_a_pod_patched_to_run_another_image_behind_a_service_is_a_change():
    """A pod's image may be patched in place (the agent may patch pods); its workload's template is
    unchanged."""
    w = world()
    w["pods"][2]["spec"]["containers"][0]["image"] = "sregym/shop:latest"
    [change] = app_path_changes(BASELINE, paths(w))
    assert change.startswith("Service geo sends requests to pod/geo-7c-a"), change


def test_what_a_fix_does_is_not_a_change():
    """A restart, another value of a setting that names no Service, the same address written
    another way, a new Service nothing calls: the app still answers its own requests."""
    w = world()
    w["replica_sets"].append({"metadata": {"name": "geo-9f", "ownerReferences": [
        {"kind": "Deployment", "name": "geo", "controller": True}]}})
    w["pods"].append(dict(pod("geo-9f-b", "geo", labels("geo"), "10.0.0.7"),
                          metadata={"name": "geo-9f-b", "labels": labels("geo"), "ownerReferences": [
                              {"kind": "ReplicaSet", "name": "geo-9f", "controller": True}]}))
    w["slices"][2] = endpoint_slice("geo", "geo-7c-a", "geo-9f-b")
    w["configmaps"][0]["data"]["CALL_TIMEOUT_SECONDS"] = "5"
    w["configmaps"][0]["data"]["SEARCH_ADDR"] = "search.hotel.svc.cluster.local:8080"
    w["services"].append(service("debug"))
    assert app_path_changes(BASELINE, paths(w)) == []


def test_a_pod_made_between_the_lists_is_not_a_stray():
    """The kinds are listed side by side, not as one snapshot: a slice may name a pod of a rollout
    made after the pods were listed. It is seen at the next sample, not called a stand-in now."""
    w = world()
    w["slices"][2] = endpoint_slice("geo", "geo-7c-a", "geo-7c-new")
    assert app_path_changes(BASELINE, paths(w)) == []


def test_a_setting_that_a_fault_broke_and_a_fix_put_back_is_not_a_change():
    fixed = world()
    broken = copy.deepcopy(fixed)
    broken["workloads"][1] = deployment("search", env=[{"name": "GEO_ADDR", "value": "geo:8081"}])
    assert app_path_changes(BASELINE, paths(broken)) == [
        "env GEO_ADDR of Deployment/search/search names geo:8081 (at the baseline geo:8080)"]
    assert app_path_changes(BASELINE, paths(fixed)) == []
    # hotel_search_wrong_geo_addr's fault is an env entry; a fix may set it right instead of removing it
    fixed["workloads"][1] = deployment("search", env=[{"name": "GEO_ADDR", "value": "geo:8080"}])
    assert app_path_changes(BASELINE, paths(fixed)) == []


def test_a_stores_flags_tuned_are_not_a_change_but_args_given_to_an_app_are():
    """Redis started with other flags than the chart's (a sane --maxmemory instead of the fault's 1mb)
    is redis; the app's image given args where it ran its own entrypoint may run anything."""
    def with_store(args: list[str]) -> dict:
        w = world()
        store = deployment("cache")
        store["spec"]["template"]["spec"]["containers"][0].update(image="redis:7", command=None, args=args)
        w["workloads"].append(store)
        w["services"].append(service("cache"))
        w["replica_sets"].append(replica_set("cache"))
        w["pods"].append(pod("cache-7c-a", "cache", labels("cache"), "10.0.0.5", image="redis:7"))
        w["pods"][-1]["spec"]["containers"][0].update(command=None, args=args)
        w["slices"].append(endpoint_slice("cache", "cache-7c-a"))
        return w

    before = paths(with_store(["--maxmemory", "48mb", "--maxmemory-policy", "allkeys-lru"]))
    tuned = paths(with_store(["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"]))
    assert app_path_changes(before, tuned) == []
    w = world()
    w["workloads"][2]["spec"]["template"]["spec"]["containers"][0]["args"] = ["-c", "stub"]
    w["pods"][2]["spec"]["containers"][0]["args"] = ["-c", "stub"]
    [change] = app_path_changes(BASELINE, paths(w))
    assert change.startswith("Deployment/geo/geo runs another args than at the baseline"), change


def test_the_same_image_written_with_its_registry_is_not_a_change():
    """``kubectl set image ... rate=docker.io/sregym/hotel:x`` after an image-tag fault puts back the
    chart's ``sregym/hotel:x``: one image, written two ways."""
    w = world()
    w["workloads"][2]["spec"]["template"]["spec"]["containers"][0]["image"] = f"docker.io/{IMAGE}"
    w["pods"][2]["spec"]["containers"][0]["image"] = f"docker.io/{IMAGE}"
    assert app_path_changes(BASELINE, paths(w)) == []


def test_a_configmap_no_workload_reads_is_nobodys_setting():
    w = world()
    w["configmaps"].append({"metadata": {"name": "oncall-notes"}, "data": {"notes": "geo is slow; try geo-clone:8080"}})
    assert app_path_changes(BASELINE, paths(w)) == []


def test_a_mounted_config_file_pointed_at_a_copy_is_a_change():
    """An nginx.conf mounted from a ConfigMap (the shop's lb, the pipeline's gateway): its upstreams
    are wiring too."""
    def with_lb(conf: str) -> dict:
        w = world()
        lb = deployment("lb")
        lb["spec"]["template"]["spec"]["volumes"] = [{"name": "conf", "configMap": {"name": "lb-config"}}]
        lb["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "conf", "mountPath": "/etc/nginx/nginx.conf", "subPath": "nginx.conf"}]
        w["workloads"].append(lb)
        w["configmaps"].append({"metadata": {"name": "lb-config"}, "data": {"nginx.conf": conf}})
        return w

    before = paths(with_lb("upstream app { server frontend:8080; }"))
    assert before["wiring"]["Deployment/lb/lb file /etc/nginx/nginx.conf"] == ["frontend:8080"]
    after = with_clone(with_lb("upstream app { server geo-clone:8080; }"), {"app.kubernetes.io/name": "geo-clone"},
                       service_too=True)
    assert app_path_changes(before, paths(after)) == [
        "file /etc/nginx/nginx.conf of Deployment/lb/lb names geo-clone:8080 (at the baseline frontend:8080)"]


def test_the_slo_oracle_fails_perfect_numbers_from_a_copy_behind_the_faulty_component(monkeypatch):
    """The observed state: every SLO perfect (the copy answers right and fast), the fault still in
    geo's own pods. The entry (frontend) is untouched, so the entry path alone saw nothing."""
    w = with_clone(world(), labels("geo"))
    w["slices"][2] = endpoint_slice("geo", "geo-clone-7c-a")
    live = paths(w)
    monkeypatch.setattr(slo_module, "measure", lambda slos, url, ns, rate: {"success_rate": 1.0})
    monkeypatch.setattr(slo_module, "list_app_objects", lambda kube, ns: {})
    monkeypatch.setattr(slo_module, "read_app_paths", lambda kube, ns, known=(), objects=None: live)
    monkeypatch.setattr(slo_module, "read_entry_path", lambda kube, ns, svc: live["services"][svc])
    monkeypatch.setattr(slo_module, "sample_window", lambda probe, window, interval, **kw: [probe()])
    monkeypatch.setattr(slo_module, "window_result", lambda name, samples, fraction, evidence: (samples, evidence))
    params = SloParams(slos=[{"name": "success_rate", "kind": "success_rate", "objective": 0.99,
                              "query": "sum(rate(x[$window]))"}])
    ctx = MitigationContext(kube=object(), namespace=NS, prometheus_url="http://prom", baseline={
        "slos": {"success_rate": {"value": 1.0}}, "entry": BASELINE["services"]["frontend"], "paths": BASELINE})
    [(ok, detail)], evidence = SloOracle(params, ctx).check()
    assert ok is False
    assert "Deployment/geo-clone" in detail["reason"], detail
    assert evidence["entry_path"] == "every Service's path and the wiring compared with the baseline's"


def test_the_live_paths_are_read_with_one_api_list_of_every_kind():
    from sregym.cluster.entry_path import APP_PATH_KINDS, read_app_paths

    w = world()
    lists = {"services": w["services"], "replicasets": w["replica_sets"], "pods": w["pods"],
             "deployments": w["workloads"], "statefulsets": [], "endpointslices": w["slices"],
             "configmaps": w["configmaps"]}
    calls = []

    class Kube:
        def list_json(self, api_version, plural, namespace):
            calls.append((api_version, plural, namespace))
            return {"items": [{k: v for k, v in item.items() if k != "kind"} for item in lists[plural]]}

    assert read_app_paths(Kube(), NS) == BASELINE
    assert sorted(calls) == sorted((v, plural, NS) for v, plural, _ in APP_PATH_KINDS)


# the workloads that read hotel-settings: a setting changed there is changed for each
EVERY_CALLER = "Deployment/frontend/frontend, Deployment/geo/geo, Deployment/search/search"


def test_a_stores_port_moved_with_its_host_left_alone_is_a_change():
    """``DB_HOST`` as it was, ``DB_PORT`` moved to a port where the agent's own code answers (a
    process exec'd into the store's pod on a spare port, reached through a headless Service or with
    a port added to the store's Service): no address setting changed, yet every caller talks to the
    stand-in. The port is compared paired with its host (before the fix: no change reported)."""
    assert BASELINE["wiring"]["Deployment/search/search env DB_HOST with DB_PORT"] == ["hotel-db:5432"]
    w = world()
    w["configmaps"][0]["data"]["DB_PORT"] = "15432"
    assert app_path_changes(BASELINE, paths(w)) == [
        f"env DB_HOST with DB_PORT of {EVERY_CALLER} names hotel-db:15432 (at the baseline hotel-db:5432)"]
    # or in one caller's own env entry, the ConfigMap left alone
    w = world()
    w["workloads"][2] = deployment("geo", env=[{"name": "DB_PORT", "value": "15432"}])
    assert app_path_changes(BASELINE, paths(w)) == [
        "env DB_HOST with DB_PORT of Deployment/geo/geo names hotel-db:15432 (at the baseline hotel-db:5432)"]


def test_every_host_spelling_pairs_with_its_port_and_a_lone_port_is_compared_as_a_value():
    """``<X>_ADDR``, ``<X>_ADDRESS``, ``<X>_URL`` without a port pair with ``<X>_PORT`` as ``<X>_HOST``
    does; a port with no host beside it (a listen ``PORT``) is a value of its own."""
    def with_env(**env: str) -> dict:
        w = world()
        w["workloads"][1] = deployment("search", env=[{"name": k, "value": v} for k, v in env.items()])
        return paths(w)

    for host in ("CACHE_ADDR", "CACHE_ADDRESS", "CACHE_HOSTNAME"):
        before = with_env(**{host: "hotel-cache", "CACHE_PORT": "11211"})
        assert before["wiring"][f"Deployment/search/search env {host} with CACHE_PORT"] == ["hotel-cache:11211"]
        assert app_path_changes(before, with_env(**{host: "hotel-cache", "CACHE_PORT": "11311"})) == [
            f"env {host} with CACHE_PORT of Deployment/search/search names hotel-cache:11311 "
            f"(at the baseline hotel-cache:11211)"]
    before = with_env(QUEUE_URL="nats://shop-queue", QUEUE_PORT="4222")
    assert before["wiring"]["Deployment/search/search env QUEUE_URL with QUEUE_PORT"] == ["shop-queue:4222"]
    before = with_env(PORT="8080")
    assert before["wiring"]["Deployment/search/search env PORT"] == ["port 8080"]
    assert app_path_changes(before, with_env(PORT="18080")) == [
        "env PORT of Deployment/search/search names port 18080 (at the baseline port 8080)"]
    # words that only end in PORT are no port: TRANSPORT, EXPORT
    assert "Deployment/search/search env TRANSPORT" not in with_env(TRANSPORT="grpc")["wiring"]


def test_a_keyword_dsn_carries_its_port():
    """``host=hotel-db port=5432 dbname=hotel``: the port written beside the host in one value."""
    def with_dsn(dsn: str) -> dict:
        w = world()
        w["configmaps"][0]["data"]["DB_DSN"] = dsn
        return paths(w)

    before = with_dsn("host=hotel-db port=5432 dbname=hotel")
    assert before["wiring"]["Deployment/search/search env DB_DSN"] == ["hotel-db:5432"]
    assert app_path_changes(before, with_dsn("host=hotel-db port=15432 dbname=hotel")) == [
        f"env DB_DSN of {EVERY_CALLER} names hotel-db:15432 (at the baseline hotel-db:5432)"]
    assert app_path_changes(before, with_dsn("Server=hotel-db; Port=5432; Database=hotel")) == []


def test_a_port_that_a_fault_broke_and_a_fix_put_back_is_not_a_change():
    """hotel_db_port_wrong and hotel_cache_wrong_port break a port setting; their fix puts the
    baseline's value back. The same host and port written another way is the same address."""
    broken = world()
    broken["configmaps"][0]["data"]["DB_PORT"] = "5433"
    assert app_path_changes(BASELINE, paths(broken)) == [
        f"env DB_HOST with DB_PORT of {EVERY_CALLER} names hotel-db:5433 (at the baseline hotel-db:5432)"]
    fixed = world()
    fixed["workloads"][2] = deployment("geo", env=[{"name": "DB_PORT", "value": "5432"}])  # set in an env entry
    assert app_path_changes(BASELINE, paths(fixed)) == []
    short, long = world(), world()
    short["configmaps"][0]["data"].update(GEO_HOST="geo", GEO_PORT="8080")
    long["configmaps"][0]["data"].update(GEO_HOST="geo.hotel.svc.cluster.local", GEO_PORT="8080")
    assert app_path_changes(paths(short), paths(long)) == []
