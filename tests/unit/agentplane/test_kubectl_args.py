"""Which kubectl invocations the agent's tool accepts, and how they are classified."""

from __future__ import annotations

import pytest

from sregym.agentplane.kubectl_args import KubectlArgsError, parse_kubectl, split_command, truncate


@pytest.mark.parametrize("command, verb, read_only", [
    ("get pods -n shop", "get", True),
    (["kubectl", "describe", "deploy/web", "-n", "shop"], "describe", True),
    ("-n shop logs web-1 --tail 50", "logs", True),
    ("--namespace=shop top pods", "top", True),
    ("rollout status deploy/web -n shop", "rollout", True),
    ("rollout history deploy/web", "rollout", True),
    ("rollout restart deploy/web -n shop", "rollout", False),
    ("rollout undo deploy/web", "rollout", False),
    ("scale deploy/web --replicas=3 -n shop", "scale", False),
    ("patch deploy web -p '{\"spec\":{\"replicas\":2}}'", "patch", False),
    ("delete pod web-1 -n shop", "delete", False),
    ("set env deploy/web FOO=bar", "set", False),
    ("exec web-1 -n shop -- cat /etc/app/config.yaml", "exec", False),
    ("auth can-i delete pods -n shop", "auth", True),
    ("events -n shop", "events", True),
])
def test_verbs_are_classified_read_only_or_write(command, verb, read_only) -> None:
    call = parse_kubectl(command)
    assert (call.verb, call.read_only) == (verb, read_only)


def test_string_and_list_forms_parse_to_the_same_args() -> None:
    assert parse_kubectl("get pods -l 'app=web tier'").args == ("get", "pods", "-l", "app=web tier")
    assert parse_kubectl(["get", "pods"]).args == parse_kubectl("kubectl get pods").args


@pytest.mark.parametrize("command, reason", [
    ("get pods --kubeconfig=/root/.kube/config", "kubeconfig"),
    ("get pods --kubeconfig /etc/admin.conf", "kubeconfig"),
    ("get pods --context admin", "--context"),
    ("get pods --as system:admin", "--as"),
    ("get pods --token abc", "--token"),
    ("get pods -s https://10.0.0.1", "-s"),
    ("get pods -shttps://10.0.0.1", "-s"),
    ("apply -f /var/lib/sregym/secret.yaml", "-f -"),
    ("apply -f=/etc/passwd", "-f -"),
    ("create configmap x --from-file=/root/.kube/config", "--from-file"),
    ("create secret generic x --from-env-file /etc/environment", "--from-env-file"),
    ("apply -k ./overlay", "-k"),
    ("get pods -o go-template-file=/etc/shadow", "template file"),
    ("get pods --output=jsonpath-file=/etc/shadow", "template file"),
    ("get pods --template /etc/shadow", "--template"),
    ("get pods -w", "never returns"),
    ("get pods --watch", "never returns"),
    ("logs web-1 -f", "never returns"),
    ("logs web-1 --follow", "never returns"),
    ("exec -it web-1 -- sh", "interactive"),
    ("edit deploy/web", "editor"),
    ("port-forward svc/web 8080:80", "never returns"),
    ("cp web-1:/etc/x /tmp/x", "copies files"),
    ("config view --raw", "kubeconfig is fixed"),
    ("frobnicate pods", "unknown"),
    ("get pods | grep web", "shell operators"),
    ("", "no kubectl arguments"),
    ("get 'unterminated", "cannot parse"),
])
def test_refused_invocations_say_why(command, reason) -> None:
    with pytest.raises(KubectlArgsError, match=reason.replace("-", r"\-").replace(".", r"\.")):
        parse_kubectl(command)


def test_manifest_on_stdin_is_allowed_only_with_stdin() -> None:
    assert parse_kubectl("apply -f -", stdin="kind: ConfigMap").verb == "apply"
    with pytest.raises(KubectlArgsError, match="stdin"):
        parse_kubectl("apply -f -")


def test_flags_after_double_dash_belong_to_the_pod_command() -> None:
    call = parse_kubectl("exec web-1 -- cat -f /etc/hosts --kubeconfig")
    assert call.verb == "exec" and call.args[-1] == "--kubeconfig"


def test_split_command_strips_the_kubectl_word() -> None:
    assert split_command("kubectl get ns") == ["get", "ns"]


def test_truncate_keeps_short_text_and_says_how_much_was_cut() -> None:
    assert truncate("abc", 10) == ("abc", False)
    text, cut = truncate("x" * 1000, 100)
    assert cut and text.startswith("x" * 100) and "showed 100 of 1000 characters" in text
    assert len(text) < 400
