"""The nightly chart lints, renders a CronJob that runs the suite with records on a volume, and
the API server accepts its objects (server-side dry run on the real cluster)."""

import subprocess
from pathlib import Path

import pytest
import yaml

from sregym.cluster.kube import helm_path

CHART = Path(__file__).parents[3] / "charts" / "nightly"


def helm(*args: str) -> str:
    proc = subprocess.run([helm_path(), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def render(*sets: str) -> dict[str, dict]:
    out = helm("template", "night", str(CHART), "--namespace", "lab", *(x for s in sets for x in ("--set", s)))
    return {d["kind"]: d for d in yaml.safe_load_all(out) if d}


def test_the_chart_lints_clean():
    assert "0 chart(s) failed" in helm("lint", str(CHART), "--strict")


def test_the_cronjob_runs_each_agent_with_resume_and_keeps_records_on_the_volume(tmp_path):
    objs = render("agents={noop,react}", "seeds=3", "noise=off")
    assert set(objs) == {"ServiceAccount", "ClusterRoleBinding", "PersistentVolumeClaim", "ConfigMap", "CronJob",
                         "Role", "RoleBinding"}
    job = objs["CronJob"]["spec"]
    pod = job["jobTemplate"]["spec"]["template"]["spec"]
    assert job["concurrencyPolicy"] == "Forbid"
    assert pod["serviceAccountName"] == objs["ServiceAccount"]["metadata"]["name"]
    assert objs["ClusterRoleBinding"]["subjects"][0]["name"] == pod["serviceAccountName"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["AGENTS"] == "noop react" and env["SEEDS"] == "3" and env["NOISE"] == "off"
    assert env["SREGYM_STATE"].startswith("/results")
    claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == objs["PersistentVolumeClaim"]["metadata"]["name"]
    script = objs["ConfigMap"]["data"]["nightly.sh"]
    assert "--resume" in script and "sregym leaderboard build" in script and "sregym cleanup" in script
    (tmp_path / "nightly.sh").write_text(script)
    assert subprocess.run(["sh", "-n", str(tmp_path / "nightly.sh")]).returncode == 0


def test_the_jobs_executor_gets_a_job_pod_file_and_may_create_jobs(tmp_path):
    from sregym.conductor.suite_jobs import load_job_pod

    objs = render("executor=jobs", "env.LAB_PORT=8080", "envFromSecret=keys", "extraVolumes[0].name=problems",
                  "extraVolumes[0].configMap.name=lab-problems")
    pod = objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}
    assert env["EXECUTOR"] == "jobs"
    script = objs["ConfigMap"]["data"]["nightly.sh"]
    assert "--job-pod /scripts/job-pod.yaml" in script
    # what a night lost with its cells left in its own folder is undone by the next night first
    assert script.index("sregym suite clean-cells --job-pod /scripts/job-pod.yaml") < script.index("sregym suite run")
    (tmp_path / "job-pod.yaml").write_text(objs["ConfigMap"]["data"]["job-pod.yaml"])
    cells = load_job_pod(tmp_path / "job-pod.yaml")
    # each cell's Job: the CronJob's image, service account, results claim (mounted where the night
    # writes), env and volumes
    assert cells.namespace == "lab" and cells.service_account == pod["serviceAccountName"]
    assert cells.image == pod["containers"][0]["image"]
    assert cells.results_claim == pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert str(cells.results_mount) == "/results" and cells.env == {"LAB_PORT": "8080"}
    assert cells.env_from_secret == "keys" and cells.volumes[0]["name"] == "problems"
    # the night's service account may create and watch the cells' Jobs in its namespace
    rules = objs["Role"]["rules"]
    assert any("jobs" in r["resources"] and "create" in r["verbs"] and "delete" in r["verbs"] for r in rules)
    assert objs["RoleBinding"]["subjects"][0]["name"] == pod["serviceAccountName"]


def night_env(*sets: str) -> dict[str, str]:
    pod = render(*sets)["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return {e["name"]: e["value"] for e in pod["containers"][0]["env"]}


def test_the_night_runs_its_cells_as_jobs_by_default_in_the_nodes_network():
    """Issue 20: the nightly chart runs its cells as Kubernetes Jobs by default; in the node's network,
    which the agent's sandbox needs to reach its cell's conductor."""
    assert night_env()["EXECUTOR"] == "jobs"
    assert "host_network: true" in render()["ConfigMap"]["data"]["job-pod.yaml"]
    assert night_env("executor=threads")["EXECUTOR"] == "threads"


def test_a_lost_night_is_retried_once_by_default_and_never_with_backoff_limit_0():
    assert render()["CronJob"]["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 1
    assert render("backoffLimit=0")["CronJob"]["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 0


def test_an_existing_claim_replaces_the_chart_pvc():
    objs = render("results.existingClaim=lab-records")
    assert "PersistentVolumeClaim" not in objs
    vols = objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
    assert vols[0]["persistentVolumeClaim"]["claimName"] == "lab-records"


@pytest.mark.cluster
def test_the_api_server_accepts_the_chart(cluster, tmp_path):
    manifest = tmp_path / "nightly.yaml"
    manifest.write_text(helm("template", "night", str(CHART), "--namespace", "default"))
    out = cluster.kube.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(manifest))
    for kind in ("cronjob.batch/night-nightly", "persistentvolumeclaim/night-nightly-results",
                 "clusterrolebinding.rbac.authorization.k8s.io/night-nightly"):
        assert kind in out.stdout


FAKE_SREGYM = """#!/bin/sh
echo "$*" >> "$CALLS"
"""


def play_night(tmp_path: Path, *sets: str) -> list[str]:
    """Run the chart's nightly.sh as its pod would, with a stand-in `sregym` that records its
    arguments, under a results folder of the test's own: the sregym calls, one line each."""
    objs = render("agents={noop,random}", *sets)
    env = {e["name"]: e["value"] for e in objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    results = tmp_path / "results"
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "nightly.sh"
    script.write_text(objs["ConfigMap"]["data"]["nightly.sh"].replace("/results", str(results)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sregym").write_text(FAKE_SREGYM)
    (bin_dir / "sregym").chmod(0o755)
    calls = tmp_path / "calls"
    proc = subprocess.run(["sh", str(script)], env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return calls.read_text().splitlines()


def test_a_retried_night_reruns_the_cells_that_ended_in_an_error_unless_told_not_to(tmp_path):
    runs = [c for c in play_night(tmp_path / "default") if c.startswith("suite run")]
    assert len(runs) == 2 and all("--resume --retry-errors" in c for c in runs), runs  # one per agent
    kept = [c for c in play_night(tmp_path / "kept", "retryErrors=false") if c.startswith("suite run")]
    assert len(kept) == 2 and not any("--retry-errors" in c for c in kept) and all("--resume" in c for c in kept), kept


def test_extra_args_that_are_numbers_reach_the_suite_as_strings():
    # `--set 'extraArgs={--baseline-window,10}'` (docs/lab.md's way) or an unquoted number in a values
    # file: a container's args are strings, and the API server refused the CronJob with a number in them
    objs = render("extraArgs={--baseline-window,10,--grade-window,20.5}")
    args = objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--baseline-window", "10", "--grade-window", "20.5"]
