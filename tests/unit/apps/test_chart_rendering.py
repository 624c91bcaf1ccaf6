"""Our charts render (``helm template``) into what the benchmark relies on: probes, scrape
annotations, settings from a ConfigMap, credentials from Secrets, node-local volumes on request."""

from __future__ import annotations

import re

import pytest
import yaml

from sregym.apps import load_app
from sregym.cluster.charts import template
from sregym.cluster.entry_path import wiring
from sregym.core.errors import UserInputError

pytestmark = pytest.mark.usefixtures("helm")  # tests/unit/apps/conftest.py

OUR_APPS = ["hotel-reservation", "online-shop", "event-pipeline"]


def render(app: str, values: dict | None = None) -> list[dict]:
    spec = load_app(app)
    return [d for d in yaml.safe_load_all(template(spec.chart, spec.namespace, values or {})) if d]


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@pytest.mark.parametrize("app", OUR_APPS)
def test_every_workload_of_the_descriptor_is_rendered(app):
    docs = render(app)
    spec = load_app(app)
    workloads = by_kind(docs, "Deployment") | by_kind(docs, "StatefulSet")
    # a store an operator runs is rendered as its custom resource (event-pipeline's QueueCluster)
    operated = {d["metadata"]["name"] for d in docs if d["apiVersion"].startswith("pipeline.sregym.io/")}
    # the load generator runs apart, out of the agent's reach (tests/unit/oracles checks where)
    assert set(spec.components) | {f"{spec.workload.service}-{spec.namespace}"} == set(workloads) | operated
    services = by_kind(docs, "Service")
    assert {s.name for s in load_app(app).services} <= set(services) | {"worker", "processor", "queue-operator"}


@pytest.mark.parametrize("app", OUR_APPS)
def test_every_container_has_liveness_and_readiness_probes(app):
    for kind in ("Deployment", "StatefulSet"):
        for name, w in by_kind(render(app), kind).items():
            for c in w["spec"]["template"]["spec"]["containers"]:
                assert "readinessProbe" in c and "livenessProbe" in c, f"{kind}/{name}/{c['name']}"


@pytest.mark.parametrize("app", OUR_APPS)
def test_python_services_are_scraped_and_read_settings_from_the_configmap(app):
    spec = load_app(app)
    for name, d in by_kind(render(app), "Deployment").items():
        container = d["spec"]["template"]["spec"]["containers"][0]
        if not container["image"].startswith(f"sregym/{spec.images['app']}:"):
            continue
        annotations = d["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        if not name.startswith("loadgen"):
            assert {"configMapRef": {"name": spec.settings.configmap}} in container["envFrom"]


@pytest.mark.parametrize("app", OUR_APPS)
def test_setting_override_reaches_the_configmap(app):
    spec = load_app(app)
    docs = render(app, {"settings": {"CALL_RETRIES": "7"}})
    assert by_kind(docs, "ConfigMap")[spec.settings.configmap]["data"]["CALL_RETRIES"] == "7"


@pytest.mark.parametrize("app", OUR_APPS)
def test_passwords_come_from_secrets_not_plain_env(app):
    passwords = 0
    for kind in ("Deployment", "StatefulSet"):
        for w in by_kind(render(app), kind).values():
            for c in w["spec"]["template"]["spec"]["containers"]:
                for env in c.get("env", []):
                    if "PASSWORD" in env["name"]:
                        passwords += 1
                        assert "secretKeyRef" in env["valueFrom"], f"{w['metadata']['name']} {env['name']}"
    assert passwords, f"{app} renders no password at all: nothing was checked"


def test_shop_redis_requires_the_password_from_its_secret():
    redis = by_kind(render("online-shop"), "StatefulSet")["shop-redis"]
    args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"


@pytest.mark.parametrize("app", OUR_APPS)
def test_hostpath_volumes_only_when_asked_and_bound_to_their_claims(app):
    assert not by_kind(render(app), "PersistentVolume")
    docs = render(app, {"persistence": {"hostPath": {"root": "/srv/vols"}}})
    volumes = by_kind(docs, "PersistentVolume")
    claims = {f"data-{name}-0" for name, sts in by_kind(docs, "StatefulSet").items()
              if sts["spec"].get("volumeClaimTemplates")}  # a memory-only cache claims nothing
    claims |= set(by_kind(docs, "PersistentVolumeClaim"))  # a Deployment's own claims
    assert {v["spec"]["claimRef"]["name"] for v in volumes.values()} == claims
    for v in volumes.values():
        assert v["spec"]["hostPath"]["path"].startswith(f"/srv/vols/{app}/")


def _claim_volumes(workload: dict) -> set[str]:
    return {v["persistentVolumeClaim"]["claimName"] for v in workload["spec"]["template"]["spec"].get("volumes") or []
            if v.get("persistentVolumeClaim")}


@pytest.mark.parametrize("app", OUR_APPS)
def test_a_deployments_claims_are_the_descriptors_rendered_and_recreated(app):
    # a service keeping a durable directory on a ReadWriteOnce claim: the descriptor names the
    # claim (sregym generate offers pvc_problem on it), the chart makes it, and a rollout stops the
    # old pod before the new one mounts it (a rolling update would wait on the volume)
    docs = render(app)
    declared = {s.name: set(s.claims) for s in load_app(app).services if s.kind == "Deployment"}
    claims = by_kind(docs, "PersistentVolumeClaim")
    for name, d in by_kind(docs, "Deployment").items():
        mounted = _claim_volumes(d)
        assert mounted == declared.get(name, set()), name
        assert mounted <= set(claims), name
        if any("ReadWriteOnce" in claims[c]["spec"]["accessModes"] for c in mounted):
            assert d["spec"]["strategy"]["type"] == "Recreate", name


def test_shop_web_keeps_its_photos_on_its_own_claim():
    web = by_kind(render("online-shop"), "Deployment")["web"]
    pod = web["spec"]["template"]["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "media")
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["MEDIA_DIR"] == mount["mountPath"]
    assert _claim_volumes(web) == {"shop-media"}
    # the hostPath provisioner makes root-owned directories; web runs as nobody
    assert [c["name"] for c in pod["initContainers"]] == ["own-data"]


# nginx in front of Services: each proxied Service by its full name, through a variable (so nginx
# asks DNS again; tests/integration/apps/test_shop_lb_follows_web_service.py measures it live)
NGINX_UPSTREAMS = {"online-shop": ("lb", ["web"]), "event-pipeline": ("gateway", ["ingest", "query"])}


@pytest.mark.parametrize("app", list(NGINX_UPSTREAMS))
def test_nginx_looks_its_upstream_services_up_again(app):
    proxy, upstreams = NGINX_UPSTREAMS[app]
    ns = load_app(app).namespace
    docs = render(app, {"clusterDomain": "lab.example"})
    conf = by_kind(docs, "ConfigMap")[f"{proxy}-config"]["data"]["nginx.conf"]
    assert not re.search(r"^\s*upstream\s", conf, re.MULTILINE)  # its servers' names are resolved once, at start
    assert "include /tmp/nginx-resolver.conf;" in conf  # the resolver the image's entrypoint writes
    proxied = re.findall(r"set \$(\w+) (\S+);\s+proxy_pass http://\$(\w+);", conf)
    assert [(var, addr) for var, addr, used in proxied if var == used] == [
        (f"{name}_upstream", f"{name}.{ns}.svc.lab.example:8080") for name in upstreams]
    # the wiring the mitigation oracle compares still names the Services at their port
    workloads = [dict(d, kind="Deployment") for d in by_kind(docs, "Deployment").values()]
    named = wiring(list(by_kind(docs, "ConfigMap").values()), workloads, set(by_kind(docs, "Service")), ns)[
        f"Deployment/{proxy}/nginx file /etc/nginx/nginx.conf"]
    assert {f"{name}:8080" for name in upstreams} <= set(named)


@pytest.mark.parametrize("app", OUR_APPS)
def test_image_references_follow_values(app):
    docs = render(app, {"images": {"app": "sregym/x:0123456789ab"}})
    images = {c["image"] for w in by_kind(docs, "Deployment").values() for c in w["spec"]["template"]["spec"]["containers"]}
    assert "sregym/x:0123456789ab" in images


@pytest.mark.parametrize("app", OUR_APPS)
def test_nothing_rendered_names_the_fault_plane(app):
    text = template(load_app(app).chart, app, {})
    assert not re.search(r"\b(chaos|fault|inject)", text, re.IGNORECASE)  # "default" is fine


def test_bad_values_are_a_user_error():
    spec = load_app("online-shop")
    with pytest.raises(UserInputError, match="helm template"):
        template(spec.chart, spec.namespace, {"redis": {"resources": "not-a-map"}, "database": None})
