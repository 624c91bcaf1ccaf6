"""The grader reads an agent's kubectl call exactly as the tool server ran it.

The agent is an adversary: any spelling that the tool server runs one way and the grader reads
another lets it hide a write on a healthy component (a wrong remediation) or claim evidence it did
not gather. Each case here is a call recorded as the server records it (``command`` and ``stdin``,
the verb and read-only class of its own parse, ``invalid`` when it refused the call) and states
what the executed command really touched or read.
"""

from __future__ import annotations

import json

import pytest

from sregym.core.kubectl_args import KubectlArgsError, parse_kubectl
from sregym.core.problem import GroundTruth
from sregym.core.trajectory import ToolCall, Trajectory
from sregym.oracles._actions import evidence_coverage, is_write, write_targets, wrong_remediations

# geo is broken; every other component is healthy, so a write on it is a wrong remediation.
GT = GroundTruth(root_cause="geo's DATABASE_URL points at the wrong port", component="geo",
                 mechanism="misconfigured env var", scope=["geo"])
POD = "geo-7d9f8c6b5-x2x9q"


def recorded(command: str | list[str], stdin: str | None = None, **kw) -> ToolCall:
    """A kubectl call as the tool server records it (sregym/agentplane/server.py)."""
    arguments: dict = {"command": command, **({"stdin": stdin} if stdin is not None else {})}
    try:
        call = parse_kubectl(command, stdin=stdin)
    except KubectlArgsError as e:
        return ToolCall(t=1, tool="kubectl", arguments=arguments, error=str(e), invalid=True)
    return ToolCall(t=1, tool="kubectl", arguments=arguments, verb=call.verb, read_only=call.read_only, **kw)


def wrong(*calls: ToolCall) -> list[str]:
    return wrong_remediations(Trajectory(tool_calls=list(calls)), GT)


def coverage(entry: str, *calls: ToolCall) -> float:
    gt = GroundTruth(root_cause="x" * 10, component="geo", mechanism="m", evidence=[entry])
    return evidence_coverage(Trajectory(tool_calls=list(calls)), gt)


def doc(kind: str, name: str, **extra) -> str:
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, **extra.pop("metadata", {})}, **extra}
    return json.dumps(body)


# -- what a write touched: the objects kubectl acted on, however the call was spelled -----------------------
@pytest.mark.parametrize("command, targets", [
    ("delete pods -lapp=frontend", ["frontend"]),                        # -l joined to its value
    ("delete pods -l=app=frontend", ["frontend"]),
    ("delete -nshop deploy frontend", ["frontend"]),                     # -n joined to its value
    ("scale deploy frontend --replicas=0 -oyaml", ["frontend"]),
    ("delete deploy frontend --namespace=shop", ["frontend"]),
    ("delete deploy frontend -n shop", ["frontend"]),
    ("delete deploy frontend --cascade foreground", ["foreground", "frontend"]),  # --cascade takes no next word
    ("delete deploy frontend --grace-period 0", ["frontend"]),
    ("delete deploy frontend --grace-period=0 --wait=false", ["frontend"]),
    ("delete deploy -- frontend", ["frontend"]),                        # after --, still kubectl's arguments
    ("rollout restart deploy/geo deploy/frontend", ["frontend", "geo"]),
    ("rollout restart deploy geo frontend", ["frontend", "geo"]),
    ("delete deploy geo frontend", ["frontend", "geo"]),
    ("delete deploy,svc frontend", ["frontend"]),                       # deploy/frontend and svc/frontend
    ("label deploy frontend team=geo", ["frontend"]),
    ("annotate deploy/frontend geo=1 --overwrite", ["frontend"]),
    ("label pods -l app=frontend geo-", ["frontend"]),
    ("set env deploy/frontend GEO_ADDR=geo:8083", ["frontend"]),
    ("set env deploy frontend -e GEO=1", ["frontend"]),
    ("set image deploy/frontend frontend=img:2", ["frontend"]),
    ("set selector svc frontend app=geo", ["frontend"]),                # the last word is the selector
    ("set serviceaccount deploy geo frontend-sa", ["geo"]),             # the last word is the account
    ("-n hotel --request-timeout 5s delete deploy frontend", ["frontend"]),  # flags before the verb
    ("-v 6 scale deploy frontend --replicas 0", ["frontend"]),
    ("scale --replicas 0 deploy/frontend", ["frontend"]),
    ("scale deploy geo --current-replicas 1 --replicas 2", ["geo"]),   # --current-replicas takes a value
    ("patch deploy frontend --type merge -p {}", ["frontend"]),
    ("taint nodes worker-1 dedicated=x:NoSchedule", ["worker-1"]),
    ("cordon worker-1", ["worker-1"]),
    ("create deployment geo-canary --image=busybox", ["geo-canary"]),
    ("create secret generic frontend-creds --from-literal=a=b", ["frontend-creds"]),
    ("expose deploy frontend --name=geo-svc --port=80", ["geo-svc"]),   # makes a Service, touches no Deployment
    ("autoscale deploy frontend --max=3", ["frontend"]),
    ("delete pods --field-selector metadata.name=frontend-7d9f8c6b5-x2x9q", ["frontend-7d9f8c6b5-x2x9q"]),
    ("delete pods -l 'app in (geo, frontend)'", ["frontend", "geo"]),
    ("delete pods -l app=frontend -l app=geo", ["geo"]),                # the last -l is the one kubectl uses
    ("delete pods --all", ["*"]),
    ("rollout restart deployment", ["*"]),                              # every Deployment in the namespace
    ("delete pods -l app!=geo", ["*"]),                                 # every pod but geo's
    ("delete pods -l 'app notin (geo)'", ["*"]),
    ("delete pods -l '!app'", ["*"]),
])
def test_write_targets_are_the_objects_kubectl_acted_on(command, targets) -> None:
    call = recorded(command)
    assert not call.invalid, call.error
    assert is_write(call)
    assert sorted(write_targets(call)) == targets


def test_a_manifest_on_stdin_is_judged_by_each_object_it_holds() -> None:
    config_and_frontend = doc("ConfigMap", "geo-config") + "\n" + doc("Deployment", "frontend", spec={"replicas": 0})
    assert sorted(write_targets(recorded("apply -f -", stdin=config_and_frontend))) == ["frontend", "geo-config"]
    assert len(wrong(recorded("apply -f -", stdin=config_and_frontend))) == 1
    yaml_docs = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: geo-config\n---\n"
                 "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: frontend\n  labels: {name: geo}\n"
                 "spec:\n  template:\n    spec:\n      containers:\n      - name: geo\n        image: x\n")
    assert sorted(write_targets(recorded("apply -f -", stdin=yaml_docs))) == ["frontend", "geo-config"]
    assert len(wrong(recorded("apply -f -", stdin=yaml_docs))) == 1


def test_a_selector_does_not_launder_the_objects_of_a_manifest() -> None:
    # kubectl applies the manifest's objects that carry the label: frontend, labelled app=geo
    stdin = doc("Deployment", "frontend", metadata={"labels": {"app": "geo"}})
    assert write_targets(recorded("apply -f - -l app=geo", stdin=stdin)) == ["frontend"]
    assert len(wrong(recorded("apply -f - -l app=geo", stdin=stdin))) == 1


def test_anything_with_items_is_a_list_to_kubectl() -> None:
    # kubectl's decoder reads any object with "items" as a list and applies the items, not the object
    stdin = json.dumps({"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "geo"},
                        "items": [json.loads(doc("Deployment", "frontend"))]})
    assert "frontend" in write_targets(recorded("apply -f -", stdin=stdin))
    assert len(wrong(recorded("apply -f -", stdin=stdin))) == 1


def test_a_right_fix_is_not_penalised_however_it_is_spelled() -> None:
    geo = doc("Deployment", "geo")
    assert wrong(recorded("delete pods -lapp=geo"),
                 recorded("apply -f-", stdin=geo),                             # -f joined to its value
                 recorded("apply -f -", stdin=geo),                            # a JSON manifest
                 recorded("apply -f -", stdin="kind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: geo-config}\n"),
                 recorded("scale deploy geo --current-replicas 1 --replicas 2"),
                 recorded(f"--request-timeout 30s delete pod {POD}"),
                 recorded("set serviceaccount deploy geo frontend-sa"),
                 recorded("delete pods -l app=frontend -l app=geo"),
                 recorded("delete pods -l app=geo,tier!=cache"),
                 recorded(["rollout", "restart", "deploy/geo"])) == []


def test_what_changes_nothing_is_not_a_write() -> None:
    for command in ("delete deploy frontend --dry-run=server", "delete deploy frontend --dry-run",
                    "scale deploy frontend --replicas=0 --dry-run=client", "label deploy frontend --list",
                    "rollout status deploy/frontend", "rollout history deploy frontend",
                    "apply view-last-applied deploy/frontend", "get deploy frontend -o yaml"):
        assert not is_write(recorded(command)), command
    assert not is_write(recorded("set env deploy/frontend --local -f - A=B", stdin=doc("Deployment", "frontend")))
    # the last --dry-run is the one kubectl uses
    assert is_write(recorded("delete deploy frontend --dry-run=server --dry-run=none"))


def test_a_stray_status_or_history_word_does_not_hide_a_restart() -> None:
    assert len(wrong(recorded("rollout restart deploy/frontend --field-manager=history"))) == 1
    assert len(wrong(recorded("rollout restart deploy/frontend -n status -n hotel"))) == 1


def test_a_failed_write_may_have_changed_things_and_counts() -> None:
    # kubectl deletes frontend, then fails on the missing name: exit 1, frontend is gone
    call = recorded("delete deploy frontend nope", error='Error from server (NotFound): deployments "nope" not found')
    assert [w for w in wrong(call) if "frontend" in w]


def test_only_the_arguments_the_server_reads_are_graded() -> None:
    # the tool takes `command` and `stdin`; anything else the agent adds is ignored by the server
    hidden = ToolCall(t=1, tool="kubectl", verb="delete", read_only=False,
                      arguments={"command": "delete deploy frontend", "args": ["rollout", "restart", "deploy/geo"]})
    assert len(wrong(hidden)) == 1 and "frontend" in wrong(hidden)[0]
    claimed = ToolCall(t=1, tool="kubectl", verb="get", read_only=True,
                       arguments={"command": "get pods", "args": ["get", "deploy", "geo"], "note": "deploy/geo"})
    assert coverage("config:deployment/geo", claimed) == 0.0


def test_a_refused_call_was_never_run() -> None:
    refused = recorded("delete deploy frontend --kubeconfig=/etc/admin.conf")
    assert refused.invalid and wrong(refused) == []
    assert coverage("logs:geo", recorded("logs deploy/geo --follow")) == 0.0


def test_a_write_the_grader_cannot_read_touches_everything() -> None:
    # recorded as run (not invalid) but unreadable now, e.g. an old record cut short: the server's class decides
    unreadable = ToolCall(t=1, tool="kubectl", verb="delete", read_only=False, arguments={"command": "delete 'x"})
    assert write_targets(unreadable) == ["*"] and len(wrong(unreadable)) == 1


def test_investigating_inside_a_pod_is_not_a_remediation() -> None:
    assert wrong(recorded("exec frontend-7d9f8c6b5-x2x9q -- wget -qO- geo:8083")) == []
    assert wrong(recorded("debug frontend-7d9f8c6b5-x2x9q --image=busybox --copy-to=frontend-debug")) == []


@pytest.mark.parametrize("command", [
    "exec frontend-7d9f8c6b5-x2x9q -- kill 1",                        # kills the process: a restart
    "exec frontend-7d9f8c6b5-x2x9q -c frontend -- pkill -f frontend",
    "exec frontend-7d9f8c6b5-x2x9q -- sh -c 'echo 1 > /tmp/flag'",     # writes a file
    "exec frontend-7d9f8c6b5-x2x9q -- sh -c 'cat /etc/hosts; rm -rf /cache'",
    "exec frontend-7d9f8c6b5-x2x9q -- sh -c 'cat $(kill 1)'",          # a command inside a command
    "exec frontend-7d9f8c6b5-x2x9q -- find / -name x -delete",
    "exec frontend-7d9f8c6b5-x2x9q -- curl -X POST localhost:8080/admin/reset",
    "exec frontend-7d9f8c6b5-x2x9q -- /usr/bin/redis-cli flushall",
    "exec deploy/frontend -- kill 1",
    ["exec", "frontend-7d9f8c6b5-x2x9q", "--", "sh", "-c", "cat 'unbalanced"],  # a script not read is not trusted
])
def test_an_exec_that_may_change_the_pod_is_a_write_on_it(command: str | list[str]) -> None:
    # `exec` runs anything inside the container: killing a process or editing a file there is a
    # remediation like any other (a restart by another name), aimed at that pod's component
    call = recorded(command)
    assert is_write(call) and write_targets(call) == ["frontend" if "deploy/frontend" in command else "frontend-7d9f8c6b5-x2x9q"]
    assert len(wrong(call)) == 1


def test_an_exec_that_only_reads_is_investigation() -> None:
    for command in ("exec frontend-7d9f8c6b5-x2x9q -- cat /etc/resolv.conf",
                    "exec frontend-7d9f8c6b5-x2x9q -- sh -c 'ps aux | grep frontend && df -h; ls -l /data'",
                    "exec frontend-7d9f8c6b5-x2x9q -c frontend -- curl -s localhost:8080/healthz",
                    "exec frontend-7d9f8c6b5-x2x9q -- nslookup geo",
                    "exec frontend-7d9f8c6b5-x2x9q -- env"):
        assert not is_write(recorded(command)), command
    # a write inside the broken component is no wrong remediation
    assert wrong(recorded(f"exec {POD} -- kill 1")) == []


def test_a_debug_copy_that_replaces_its_pod_deletes_that_pod() -> None:
    call = recorded("debug frontend-7d9f8c6b5-x2x9q --image=busybox --copy-to=geo-debug --replace")
    assert is_write(call) and write_targets(call) == ["frontend-7d9f8c6b5-x2x9q", "geo-debug"]
    assert len(wrong(call)) == 1


# -- what a read gathered: the objects it named, not any word anywhere in the call ------------------------
def test_evidence_comes_from_the_objects_a_call_read() -> None:
    assert coverage("logs:geo", recorded("logs -lapp=geo --tail 50")) == 1.0
    assert coverage("logs:geo", recorded(f"-n hotel logs {POD} -c geo")) == 1.0
    assert coverage("config:deployment/geo", recorded("get deploy/geo -oyaml")) == 1.0
    assert coverage("config:deployment/geo", recorded("describe deploy geo")) == 1.0
    assert coverage("events:geo", recorded(f"get events --field-selector involvedObject.name={POD}")) == 1.0
    assert coverage("events:geo", recorded("events --for deploy/geo")) == 1.0
    assert coverage("metrics:geo", recorded("top pod -l app=geo")) == 1.0


@pytest.mark.parametrize("call, entry", [
    (recorded("get pods", stdin="deploy/geo"), "config:deployment/geo"),      # stdin that kubectl never reads
    (recorded("get pods -o jsonpath={.geo}"), "config:deployment/geo"),       # a word in an output template
    (recorded("get deploy frontend --show-labels -L geo"), "config:deployment/geo"),  # a label column
    (recorded("logs deploy/frontend --since=5m --prefix"), "logs:frontend-geo"),
    (recorded("get pods -l app=geo,tier=events"), "events:geo"),              # it read pods, not events
    (ToolCall(t=1, tool="query_logs", arguments={"namespace": "hotel", "pod": "frontend", "text": "geo"}), "logs:geo"),
])
def test_a_word_in_a_call_is_not_evidence(call, entry) -> None:
    assert not call.invalid, call.error
    assert coverage(entry, call) == 0.0


def test_a_repeated_key_cannot_hide_a_name() -> None:
    # Go's readers keep the last value, a strict server refuses the object: the grader sees both
    call = recorded("apply -f -", stdin="kind: Deployment\nmetadata:\n  name: frontend\n  name: geo\n")
    assert write_targets(call) == ["frontend", "geo"] and len(wrong(call)) == 1


def test_a_manifest_made_to_stall_the_grader_is_read_once_per_node() -> None:
    bomb = "a: &a [{metadata: {name: geo}}]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    call = recorded("apply -f -", stdin=f"kind: List\nmetadata: {{name: geo-list}}\n{bomb}items: *i\n")
    assert write_targets(call) == ["geo", "geo-list"]
    # a list that holds itself cannot be read (nor by kubectl): it touches everything
    assert write_targets(recorded("apply -f -", stdin="kind: List\nitems: &x [*x]\n")) == ["*"]
