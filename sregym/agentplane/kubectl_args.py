"""What the agent may pass to kubectl, and what kind of action it is.

The agent's kubectl runs with the agent's kubeconfig only. RBAC is the real fence; these rules
close the paths around it that RBAC cannot see: flags that switch credentials or clusters, and
flags that make kubectl read files on the host that serves the agent (``-f /path``,
``--from-file``, ``-o go-template-file=...``), which would copy host files into the cluster
where the agent can read them. Verbs that never return (``-w``, ``logs -f``, ``port-forward``)
are refused because a tool call must end.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

READ_VERBS = frozenset({
    "get", "describe", "logs", "top", "explain", "api-resources", "api-versions", "version",
    "cluster-info", "events", "auth", "diff", "wait",
})
WRITE_VERBS = frozenset({
    "apply", "create", "delete", "patch", "replace", "scale", "rollout", "set", "label", "annotate",
    "expose", "autoscale", "cordon", "uncordon", "drain", "taint", "run", "exec", "debug",
})
# rollout subcommands that only read
READ_ROLLOUT = frozenset({"status", "history"})
REFUSED_VERBS = {
    "edit": "needs an interactive editor; use `kubectl patch` or `kubectl apply -f -` with stdin",
    "port-forward": "never returns; query services through the metrics, logs and traces tools",
    "proxy": "never returns",
    "attach": "is interactive",
    "cp": "copies files between the tool host and pods; use `kubectl exec POD -- cat FILE`",
    "config": "the kubeconfig is fixed",
    "plugin": "plugins are not available",
    "kustomize": "reads local directories; pipe manifests through stdin with `apply -f -`",
    "certificate": "is not part of an SRE's role here",
    "completion": "is not useful here",
    "alpha": "is not available",
}
# Flags that would switch identity or cluster: the kubeconfig is fixed.
CREDENTIAL_FLAGS = frozenset({
    "--kubeconfig", "--context", "--cluster", "--user", "--token", "--server", "-s", "--as", "--as-group",
    "--as-uid", "--certificate-authority", "--client-certificate", "--client-key", "--insecure-skip-tls-verify",
    "--username", "--password", "--tls-server-name", "--cache-dir",
})
# Flags whose value is a path on the host that runs kubectl.
HOST_FILE_FLAGS = frozenset({"--from-file", "--from-env-file", "-k", "--kustomize", "--template"})
FILENAME_FLAGS = frozenset({"-f", "--filename"})
# Global flags that take a value (so the verb is found after them).
VALUE_FLAGS = frozenset({"-n", "--namespace", "-l", "--selector", "-o", "--output", "--request-timeout",
                         "-v", "--v", "--field-selector"})


class KubectlArgsError(ValueError):
    """The arguments are refused; the message tells the agent what to do instead."""


@dataclass(frozen=True)
class KubectlCall:
    """Parsed arguments: ``args`` go to kubectl after the fixed kubeconfig flag."""

    args: tuple[str, ...]
    verb: str
    read_only: bool


def split_command(command: str | list[str]) -> list[str]:
    """Accept ``"get pods -n x"``, ``"kubectl get pods"`` or ``["get", "pods"]``."""
    if isinstance(command, str):
        try:
            parts = shlex.split(command)
        except ValueError as e:
            raise KubectlArgsError(f"cannot parse the command line: {e}") from None
    else:
        parts = [str(p) for p in command]
    if parts and parts[0] in ("kubectl", "k"):
        parts = parts[1:]
    if not parts:
        raise KubectlArgsError("no kubectl arguments given, e.g. [\"get\", \"pods\", \"-n\", \"NAMESPACE\"]")
    if any(p in ("|", "||", "&&", ";", ">", ">>", "<") for p in parts):
        raise KubectlArgsError("shell operators (| ; > <) are not supported: this runs kubectl only, not a shell; "
                               "use -o jsonpath, -l or --field-selector to narrow output")
    return parts


def _split_flag(arg: str, nxt: str | None) -> tuple[str, str]:
    """(flag name, value) for ``--name=v``, ``--name v``, ``-xv``, ``-x=v`` and ``-x v`` forms."""
    if arg.startswith("--"):
        name, _, value = arg.partition("=")
        return name, value if "=" in arg else (nxt or "")
    if len(arg) > 2:
        return arg[:2], arg[2:].lstrip("=")
    return arg, nxt or ""


def find_verb(parts: list[str]) -> tuple[str, int]:
    """The first positional argument (the verb) and its index; flags with values are skipped."""
    i = 0
    while i < len(parts):
        arg = parts[i]
        if arg.startswith("-"):
            if "=" not in arg and arg in VALUE_FLAGS:
                i += 1
            i += 1
            continue
        return arg, i
    raise KubectlArgsError("no kubectl verb found (e.g. get, describe, logs, rollout, scale, patch)")


def check_flags(parts: list[str], *, verb: str, allow_stdin: bool) -> None:
    """Refuse flags that change credentials, read host files, or never return."""
    for i, arg in enumerate(parts):
        if arg == "--":
            break  # what follows goes to a command inside a pod (exec), not to kubectl
        if not arg.startswith("-") or arg == "-":
            continue
        name, value = _split_flag(arg, parts[i + 1] if i + 1 < len(parts) else None)
        if name in CREDENTIAL_FLAGS:
            raise KubectlArgsError(f"{name} is not allowed: the agent's kubeconfig and identity are fixed")
        if name in HOST_FILE_FLAGS:
            raise KubectlArgsError(f"{name} reads files on the tool host, which the agent cannot use; "
                                   "pass manifests on stdin with `-f -`")
        if name in ("-w", "--watch", "--watch-only", "--follow") or (verb == "logs" and name == "-f"):
            raise KubectlArgsError(f"{name} never returns; call the tool again (logs: use --since or --tail)")
        if name in FILENAME_FLAGS:
            if value != "-":
                raise KubectlArgsError("only `-f -` is allowed (the manifest goes in the `stdin` argument); "
                                       "files on the tool host are not available")
            if not allow_stdin:
                raise KubectlArgsError("`-f -` needs the manifest in the `stdin` argument")
        if name in ("-o", "--output") and value.split("=", 1)[0].endswith("-file"):
            raise KubectlArgsError("output formats that read a template file are not allowed; "
                                   "give the template inline, e.g. -o jsonpath='{.items[*].metadata.name}'")
        if name in ("-i", "--stdin", "-t", "--tty"):
            raise KubectlArgsError("interactive sessions are not supported; run one command: exec POD -- CMD ARGS")


def parse_kubectl(command: str | list[str], *, stdin: str | None = None) -> KubectlCall:
    """Validate one kubectl invocation and classify it (read-only or not)."""
    parts = split_command(command)
    verb, at = find_verb(parts)
    if verb in REFUSED_VERBS:
        raise KubectlArgsError(f"`kubectl {verb}` is not available: it {REFUSED_VERBS[verb]}")
    if verb not in READ_VERBS and verb not in WRITE_VERBS:
        known = ", ".join(sorted(READ_VERBS | WRITE_VERBS))
        raise KubectlArgsError(f"unknown or unsupported kubectl verb {verb!r}; supported: {known}")
    check_flags(parts, verb=verb, allow_stdin=stdin is not None)
    read_only = verb in READ_VERBS or (verb == "rollout" and len(parts) > at + 1 and parts[at + 1] in READ_ROLLOUT)
    return KubectlCall(args=tuple(parts), verb=verb, read_only=read_only)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep at most ``limit`` characters and say how much was cut, so the agent can narrow its query."""
    if len(text) <= limit:
        return text, False
    note = (f"\n[output truncated: showed {limit} of {len(text)} characters; narrow the query "
            "(-l selector, --field-selector, -o jsonpath, --tail, a smaller time range)]")
    return text[:limit] + note, True
