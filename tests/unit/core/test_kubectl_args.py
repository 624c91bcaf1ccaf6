"""Which kubectl invocations the agent's tool accepts, read with kubectl's own grammar, and how they are classified.

The attacks are the forms an agent would try to read or write files on the host that runs the tool
(found live: ``get -Rf FILE`` printed the file in kubectl's decode error, ``--profile-output`` wrote a
file as root). The table of allowed flags is checked against the installed kubectl's own help.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import pytest

from sregym.agentplane.agents.random_walk import choose_call
from sregym.core.kubectl_args import (ALIASES, COMMANDS, GLOBAL, KubectlArgsError, flag_table, parse_kubectl,
                                      split_command)
from sregym.cluster.binaries import KUBERNETES

HOST_FILE = "/var/lib/sregym/clusters/default/admin.kubeconfig"


@pytest.mark.parametrize("command, verb, read_only", [
    ("get pods -n shop", "get", True),
    (["kubectl", "describe", "deploy/web", "-n", "shop"], "describe", True),
    ("-n shop logs web-1 --tail 50", "logs", True),
    ("--namespace=shop top pods", "top", True),
    ("rollout status deploy/web -n shop", "rollout", True),
    ("rollout history deploy/web", "rollout", True),
    ("rollout restart deploy/web -n shop", "rollout", False),
    ("rollout -n shop undo deploy/web", "rollout", False),
    ("scale deploy/web --replicas=3 -n shop", "scale", False),
    ("patch deploy web -p '{\"spec\":{\"replicas\":2}}'", "patch", False),
    ("delete pod web-1 -n shop", "delete", False),
    ("set env deploy/web FOO=bar", "set", False),
    ("exec web-1 -n shop -- cat /etc/app/config.yaml", "exec", False),
    ("auth can-i delete pods -n shop", "auth", True),
    ("events -n shop", "events", True),
    ("apply view-last-applied deploy/web -o yaml", "apply", True),
    ("get --raw /apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", "get", True),
])
def test_verbs_are_classified_read_only_or_write(command, verb, read_only) -> None:
    call = parse_kubectl(command)
    assert (call.verb, call.read_only) == (verb, read_only)


@pytest.mark.parametrize("command, args", [
    ("get pods -l 'app=web tier'", ("get", "--selector=app=web tier", "pods")),
    ("-n shop logs web-1 --tail 50", ("logs", "--namespace=shop", "--tail=50", "web-1")),
    ("get pods -Aowide", ("get", "--all-namespaces", "--output=wide", "pods")),
    ("get pods -n=shop -ojson", ("get", "--namespace=shop", "--output=json", "pods")),
    ("get pods --all_namespaces", ("get", "--all-namespaces", "pods")),  # kubectl reads _ as -
    ("top po --all-namespaces=false", ("top", "pod", "--all-namespaces=false")),
    ("create cm cfg --from-literal=a=b", ("create", "configmap", "--from-literal=a=b", "cfg")),
    ("apply --dry-run -f -", ("apply", "--dry-run", "--filename=-")),  # --dry-run's value is optional
    ("delete pod web-1 --cascade orphan", ("delete", "--cascade", "pod", "web-1", "orphan")),  # as pflag reads it
    ("exec web-1 -c app -- sh -c 'ls -la /'", ("exec", "--container=app", "web-1", "--", "sh", "-c", "ls -la /")),
    ("run dbg --image=busybox --restart=Never --command -- sleep 5",
     ("run", "--image=busybox", "--restart=Never", "--command", "dbg", "--", "sleep", "5")),
    ("-v 6 get pods", ("get", "--v=6", "pods")),
])
def test_arguments_reach_kubectl_in_one_canonical_form(command, args) -> None:
    assert parse_kubectl(command, stdin="kind: List").args == args


def test_string_and_list_forms_parse_to_the_same_args() -> None:
    assert parse_kubectl(["get", "pods", "-l", "app=web tier"]).args == parse_kubectl("get pods -l 'app=web tier'").args
    assert parse_kubectl(["get", "pods"]).args == parse_kubectl("kubectl get pods").args


# Every form an agent would try to make kubectl read, write or fetch something on the tool host,
# change identity, or hang.
ATTACKS = [
    # host files through -f in every spelling pflag accepts
    (["get", "-Rf", HOST_FILE], "-R"),
    (["get", f"-Rf{HOST_FILE}"], "-R"),
    (["get", "-fR"], "only `-f -`"),
    (["get", f"-f{HOST_FILE}"], "only `-f -`"),
    (["get", f"-f={HOST_FILE}"], "only `-f -`"),
    (["get", f"--filename={HOST_FILE}"], "only `-f -`"),
    (["get", "--filename", HOST_FILE], "only `-f -`"),
    (["apply", "-f", "/var/lib/sregym/secret.yaml"], "only `-f -`"),
    (["apply", "-f", "http://10.0.0.1/x.yaml"], "only `-f -`"),
    (["apply", "-R", "-f", "-"], "-R"),
    (["apply", "-k", "./overlay"], "-k"),
    (["apply", "--kustomize=/etc"], "kustomize"),
    (["create", "-f", "-", "--raw", "/api/v1/namespaces/shop/configmaps"], "--raw"),
    # profiling and caches write files on the host
    (["get", "pods", "--profile=cpu", f"--profile-output={HOST_FILE}"], "profiling"),
    (["get", "pods", "--profile", "cpu", "--profile-output", "/tmp/x"], "profiling"),
    (["--profile-output=/tmp/x", "get", "pods"], "profiling"),
    (["get", "pods", "--cache-dir=/tmp/c"], "writes files"),
    (["cluster-info", "dump", "--output-directory=/tmp/x"], "cluster-info dump"),
    (["get", "pods", f"--kuberc={HOST_FILE}"], "fixed"),
    # template and data files
    (["get", "pods", "-o", f"go-template-file={HOST_FILE}"], "template files"),
    (["get", "pods", "-o", f"templatefile={HOST_FILE}"], "template files"),
    (["get", "pods", f"--output=jsonpath-file={HOST_FILE}"], "template files"),
    (["get", "pods", f"-ocustom-columns-file={HOST_FILE}"], "template files"),
    (["get", "pods", "-o", "jsonpath", "--template", HOST_FILE], "template files"),
    (["get", "pods", "-o", "go-template", f"--template={HOST_FILE}"], "template files"),
    (["get", "pods", "--template", HOST_FILE], "inline"),
    (["create", "configmap", "x", f"--from-file={HOST_FILE}"], "--from-file"),
    (["create", "configmap", "x", f"--from_file={HOST_FILE}"], "--from_file"),
    (["create", "secret", "generic", "x", "--from-env-file", "/etc/environment"], "--from-env-file"),
    (["create", "secret", "tls", "x", f"--cert={HOST_FILE}", f"--key={HOST_FILE}"], "secret tls"),
    (["create", "secret", "docker-registry", "x", f"--from-file={HOST_FILE}"], "--from-file"),
    (["patch", "deploy/web", f"--patch-file={HOST_FILE}"], "--patch-file"),
    (["debug", "pod/web", "--image=busybox", f"--custom={HOST_FILE}"], "--custom"),
    (["create", "-f", "-", "--edit"], "interactive"),
    # identity and cluster
    (["get", "pods", f"--kubeconfig={HOST_FILE}"], "kubeconfig"),
    (["get", "pods", "--kubeconfig", "/etc/admin.conf"], "kubeconfig"),
    (["get", "pods", "--context", "admin"], "--context"),
    (["get", "pods", "--as", "system:admin"], "--as"),
    (["get", "pods", "--as-group=system:masters"], "--as-group"),
    (["get", "pods", "--token", "abc"], "--token"),
    (["get", "pods", "-s", "https://10.0.0.1"], "-s"),
    (["get", "pods", "-shttps://10.0.0.1"], "-s"),
    (["--server=https://10.0.0.1", "get", "pods"], "--server"),
    (["get", "pods", "--insecure-skip-tls-verify"], "fixed"),
    (["get", "pods", "--raw", "http://10.0.0.1/"], "--raw"),
    (["get", "--raw", "//10.0.0.1/x"], "--raw"),
    (["create", "token", "default"], "credentials"),
    (["run", "x", "--image=busybox", "--privileged"], "--privileged"),
    # never returns, interactive
    (["get", "pods", "-w"], "never returns"),
    (["get", "pods", "-Aw"], "never returns"),
    (["get", "pods", "--watch-only"], "never returns"),
    (["logs", "web-1", "-f"], "never returns"),
    (["logs", "web-1", "-pf"], "never returns"),
    (["logs", "web-1", "--follow=true"], "never returns"),
    (["events", "--watch"], "never returns"),
    (["exec", "-it", "web-1", "--", "sh"], "interactive"),
    (["exec", "web-1", "-i", "--", "sh"], "interactive"),
    (["run", "x", "--image=busybox", "--rm", "-it", "--", "sh"], "interactive"),
    (["debug", "pod/web", "--image=busybox", "--attach"], "interactive"),
    (["debug", "pod/web", "--image=busybox", "--profile=sysadmin"], "sysadmin"),
    (["edit", "deploy/web"], "editor"),
    (["apply", "edit-last-applied", "deploy/web"], "editor"),
    (["port-forward", "svc/web", "8080:80"], "never returns"),
    (["cp", "web-1:/etc/x", "/tmp/x"], "copies files"),
    (["config", "view", "--raw"], "kubeconfig is fixed"),
    (["kustomize", "/etc"], "local directories"),
    # the grammar's corners
    (["--", "get", "pods"], "no kubectl verb"),
    (["-n", "get"], "no kubectl verb"),
    (["-A", "get", "pods"], "before the command"),
    (["frobnicate", "pods"], "unknown"),
    (["create", "clusterrolebinding", "x", "--clusterrole=cluster-admin"], "create clusterrolebinding"),
    (["top"], "needs one of"),
    (["get", "pods", "---output=json"], "bad flag syntax"),
    (["get", "pods", "-o", "jsonpath"], "inline template"),
    (["get", "pods", "--all-namespaces=/etc/passwd"], "not a boolean"),
    (["get", "pods", "-v", "9;cat"], "log level"),
    (["get", "pods", "-n"], "needs a value"),
    (["get", "pods\0"], "NUL"),
    ("get pods | grep web", "shell operators"),
    ("", "no kubectl arguments"),
    ("get 'unterminated", "cannot parse"),
]


@pytest.mark.parametrize("command, reason", ATTACKS)
def test_refused_invocations_say_why(command, reason) -> None:
    with pytest.raises(KubectlArgsError, match=re.escape(reason)):
        parse_kubectl(command, stdin="kind: List")


def test_manifest_on_stdin_is_allowed_only_with_stdin() -> None:
    assert parse_kubectl("apply -f -", stdin="kind: ConfigMap").verb == "apply"
    with pytest.raises(KubectlArgsError, match="stdin"):
        parse_kubectl("apply -f -")


def test_flags_after_double_dash_belong_to_the_pod_command() -> None:
    call = parse_kubectl("exec web-1 -- cat -f /etc/hosts --kubeconfig")
    assert call.verb == "exec" and call.args[-5:] == ("--", "cat", "-f", "/etc/hosts", "--kubeconfig")


def test_unknown_flags_are_refused_with_the_flags_that_are_allowed() -> None:
    with pytest.raises(KubectlArgsError) as refused:
        parse_kubectl("get pods --frobnicate")
    assert "`kubectl get`" in str(refused.value) and "-l/--selector" in str(refused.value)


def test_split_command_strips_the_kubectl_word() -> None:
    assert split_command("kubectl get ns") == ["get", "ns"]


def test_the_builtin_agents_calls_are_accepted() -> None:
    rng = random.Random(3)
    for _ in range(200):
        name, args = choose_call(rng, "shop", {"kubectl", "query_logs", "query_metrics"})
        if name == "kubectl":
            assert parse_kubectl(args["command"]).read_only
    # what the react agent's tests and docs show
    for command in (["version", "--client"], "get pods -n shop", ["get", "pods", "-n", "shop", "-o", "wide"]):
        parse_kubectl(command)


# -- the table is kubectl's own: every allowed flag exists with that kind in the installed kubectl ----------
def installed_kubectls() -> list[str]:
    """The kubectl on PATH (always on this machine) and the cluster's own build when it is there."""
    found = [p for p in (shutil.which("kubectl"), str(KUBERNETES.path("kubectl"))) if p and Path(p).is_file()]
    assert found, "kubectl is not installed"
    return found


OPTION = re.compile(r"^\s+(?:-(\w), )?--([\w-]+)=(.*):$")


@lru_cache(maxsize=None)
def kubectl_help(kubectl: str, path: str) -> tuple[dict[str, tuple[str | None, str]], str]:
    """(flags by name -> (shorthand, default as printed), the whole help) of ``kubectl PATH --help``."""
    argv = [kubectl, "options"] if path == "options" else [kubectl, *path.split(), "--help"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"HOME": "/nonexistent"}).stdout
    section = out.split("Options:", 1)[1].split("Usage:", 1)[0] if "Options:" in out else out
    return {m[2]: (m[1], m[3]) for m in map(OPTION.match, section.splitlines()) if m}, out


@pytest.mark.parametrize("kubectl", installed_kubectls())
def test_every_allowed_flag_exists_in_kubectl_with_that_kind(kubectl: str) -> None:
    paths = [p for p in COMMANDS if p]
    with ThreadPoolExecutor(8) as pool:
        helps = dict(zip(paths, pool.map(lambda p: kubectl_help(kubectl, p), paths)))
    global_names = set(flag_table(GLOBAL))
    options, _ = kubectl_help(kubectl, "options")
    wrong = []
    for path, cmd in COMMANDS.items():
        for flag in cmd.flags.values():
            if flag.name == "help":
                continue  # cobra's own on every command; not listed in the help's Options
            known = (options if flag.name in global_names else helps[path][0]).get(flag.name)
            if known is None:
                wrong.append(f"{path or 'global'}: --{flag.name} does not exist")
                continue
            short, default = known
            is_bool = default in ("true", "false")
            if short != flag.short or is_bool != (flag.kind == "bool"):
                wrong.append(f"{path or 'global'}: --{flag.name} is -{short} default {default}, table says {flag}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("kubectl", installed_kubectls())
def test_subcommands_and_aliases_are_kubectls(kubectl: str) -> None:
    for alias, path in ALIASES.items():
        _, text = kubectl_help(kubectl, path)
        assert re.search(rf"^Aliases:\n\s*{re.escape(path.split()[-1])}\b.*\b{re.escape(alias.split()[-1])}\b",
                         text, re.M), f"{alias} is not an alias of {path}"
    for path in COMMANDS:
        if path:
            usage = kubectl_help(kubectl, path)[1]
            assert re.search(rf"^Usage:\n\s+kubectl {re.escape(path)}( |$)", usage, re.M), f"no kubectl {path}"


@pytest.mark.parametrize("kubectl", installed_kubectls())
@pytest.mark.parametrize("path, flag", [("apply", "dry-run"), ("apply", "validate"), ("delete", "cascade")])
def test_optional_value_flags_take_no_following_argument(kubectl: str, path: str, flag: str) -> None:
    """pflag's NoOptDefVal: `--dry-run --help` leaves --help a flag (help is printed). A flag that needs
    its value would eat --help and run the command instead."""
    assert COMMANDS[path].flags[flag].kind == "optional"
    out = subprocess.run([kubectl, *path.split(), f"--{flag}", "--help"], capture_output=True, text=True,
                         timeout=30, env={"HOME": "/nonexistent", "KUBECONFIG": "/nonexistent"})
    assert out.returncode == 0 and "Usage:" in out.stdout
