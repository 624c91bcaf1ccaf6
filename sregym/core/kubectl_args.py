"""What the agent may pass to kubectl, read with kubectl's own grammar, and what kind of action it is.

Two readers share it, so they cannot disagree: the agent's tool server (which refuses what it does
not accept and runs exactly the canonical arguments) and the grader (which reads the recorded call
to learn what ran, see ``sregym/oracles/_actions.py``). It lives in ``core`` because those two are
independent layers.

RBAC (and admission) are the real fences; this module closes the paths around them that run on
the host serving the tools: flags that read or write files there (``-f PATH``, ``--from-file``,
``-o templatefile=``, ``--profile-output``, ``--cache-dir``, ``--kuberc``, ...), fetch URLs from
there (``-f http://...``), switch credentials or clusters, never return, or are interactive.

It is an allow-list, not a deny-list: arguments are parsed as kubectl parses them (cobra finds the
command, then pflag reads the flags: ``--name=value``, ``--name value``, booleans, combined short
flags ``-Rf x`` / ``-Rfx``, ``-n=x``, ``--`` ends the flags, ``_`` read as ``-`` in long names),
and each command accepts only the flags listed for it in :data:`COMMANDS`, each with its kind.
Anything else is refused with a message the agent can act on. kubectl then receives the
arguments re-written in one canonical form (``--long=value``), so what runs is exactly what was
checked. ``tests/unit/core/test_kubectl_args.py`` checks every listed flag against the
installed kubectl's own ``--help``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable, Literal

Kind = Literal["bool", "value", "optional"]  # optional: pflag's NoOptDefVal, a value only as --name=value


@dataclass(frozen=True)
class Flag:
    """One kubectl flag as pflag knows it."""

    name: str
    short: str | None
    kind: Kind


@dataclass(frozen=True)
class Command:
    """One kubectl command (``get``, ``create configmap``...) with the flags it accepts."""

    path: str
    read_only: bool
    flags: dict[str, Flag]  # by long name, global ones included
    subcommands: dict[str, str]  # word or alias -> path of the subcommand

    def by_short(self, letter: str) -> Flag | None:
        return next((f for f in self.flags.values() if f.short == letter), None)


def flag_table(spec: str) -> dict[str, Flag]:
    """``"-A/--all-namespaces --chunk-size= --dry-run=?"``: bool, takes a value, optional value."""
    out: dict[str, Flag] = {}
    for item in spec.split():
        short = None
        if item.startswith("-") and not item.startswith("--"):
            short, item = item[1], item.split("/", 1)[1]
        name = item[2:].rstrip("=?")
        kind: Kind = "optional" if item.endswith("=?") else "value" if item.endswith("=") else "bool"
        out[name] = Flag(name, short, kind)
    return out


# Every command accepts these. --help/-h is cobra's own (not listed in `kubectl options`).
GLOBAL = "-n/--namespace= --request-timeout= -v/--v= -h/--help"
OUT = "-o/--output= --allow-missing-template-keys --show-managed-fields"  # printing, inline templates only
WRITE = "--dry-run=? --field-manager= " + OUT
CREATE = WRITE + " --save-config --validate=?"
SET = "--all -f/--filename= --local " + WRITE

# path -> (read only, flags). Only flags that read no file on the tool host, switch no identity,
# and return. Paths with subcommands list them in SUBCOMMANDS.
_TABLE: dict[str, tuple[bool, str]] = {
    "": (True, ""),
    "get": (True, "-A/--all-namespaces --chunk-size= --field-selector= -f/--filename= --ignore-not-found "
                  "-L/--label-columns= --no-headers --raw= -l/--selector= --server-print --show-kind --show-labels "
                  "--sort-by= --subresource= " + OUT),
    "describe": (True, "-A/--all-namespaces --chunk-size= -f/--filename= -l/--selector= --show-events"),
    "logs": (True, "--all-containers --all-pods -c/--container= --ignore-errors --limit-bytes= --max-log-requests= "
                   "--pod-running-timeout= --prefix -p/--previous -l/--selector= --since= --since-time= --tail= "
                   "--timestamps"),
    "top": (True, ""),
    "top pod": (True, "-A/--all-namespaces --containers --field-selector= --no-headers -l/--selector= --sort-by= "
                      "--sum --use-protocol-buffers"),
    "top node": (True, "--no-headers -l/--selector= --show-capacity --sort-by= --use-protocol-buffers"),
    "explain": (True, "--api-version= -o/--output= --recursive"),
    "api-resources": (True, "--api-group= --cached --categories= --namespaced --no-headers -o/--output= --sort-by= "
                            "--verbs="),
    "api-versions": (True, ""),
    "version": (True, "--client -o/--output="),
    "cluster-info": (True, ""),
    "events": (True, "-A/--all-namespaces --chunk-size= --for= --no-headers --types= " + OUT),
    "auth": (True, ""),
    "auth can-i": (True, "-A/--all-namespaces --list --no-headers -q/--quiet --subresource="),
    "auth whoami": (True, OUT),
    "auth reconcile": (False, "-f/--filename= --remove-extra-permissions --remove-extra-subjects --dry-run=? " + OUT),
    "diff": (True, "--concurrency= --field-manager= -f/--filename= --force-conflicts -l/--selector= --server-side "
                   "--show-managed-fields"),
    "wait": (True, "--all -A/--all-namespaces --field-selector= -f/--filename= --for= -l/--selector= --timeout= "
                   + OUT),
    "apply": (False, "--all --cascade=? -f/--filename= --force --force-conflicts --grace-period= --overwrite "
                     "-l/--selector= --server-side --subresource= --timeout= --validate=? --wait " + WRITE),
    "apply view-last-applied": (True, "--all -f/--filename= -o/--output= -l/--selector="),
    "apply set-last-applied": (False, "--create-annotation -f/--filename= --dry-run=? " + OUT),
    "create": (False, "-f/--filename= -l/--selector= " + CREATE),
    "create configmap": (False, "--append-hash --from-literal= " + CREATE),
    "create secret": (False, ""),
    "create secret generic": (False, "--append-hash --from-literal= --type= " + CREATE),
    "create secret docker-registry": (False, "--append-hash --docker-email= --docker-password= --docker-server= "
                                             "--docker-username= " + CREATE),
    "create deployment": (False, "--image= --port= -r/--replicas= " + CREATE),
    "create job": (False, "--from= --image= " + CREATE),
    "create cronjob": (False, "--image= --restart= --schedule= " + CREATE),
    "create service": (False, ""),
    "create service clusterip": (False, "--clusterip= --tcp= " + CREATE),
    "create service nodeport": (False, "--node-port= --tcp= " + CREATE),
    "create service loadbalancer": (False, "--tcp= " + CREATE),
    "create service externalname": (False, "--external-name= --tcp= " + CREATE),
    "create namespace": (False, CREATE),
    "create serviceaccount": (False, CREATE),
    "create poddisruptionbudget": (False, "--max-unavailable= --min-available= --selector= " + CREATE),
    "create priorityclass": (False, "--description= --global-default --preemption-policy= --value= " + CREATE),
    "create quota": (False, "--hard= --scopes= " + CREATE),
    "create role": (False, "--resource= --resource-name= --verb= " + CREATE),
    "create rolebinding": (False, "--clusterrole= --group= --role= --serviceaccount= --user= " + CREATE),
    "create ingress": (False, "--annotation= --class= --default-backend= --rule= " + CREATE),
    "delete": (False, "--all -A/--all-namespaces --cascade=? --dry-run=? --field-selector= -f/--filename= --force "
                      "--grace-period= --ignore-not-found --now -o/--output= -l/--selector= --timeout= --wait"),
    "patch": (False, "-f/--filename= --local -p/--patch= --subresource= --type= " + WRITE),
    "replace": (False, "--cascade=? -f/--filename= --force --grace-period= --save-config --subresource= --timeout= "
                       "--validate=? --wait " + WRITE),
    "scale": (False, "--all --current-replicas= --dry-run=? -f/--filename= --replicas= --resource-version= "
                     "-l/--selector= --timeout= " + OUT),
    "label": (False, "--all -A/--all-namespaces --field-selector= -f/--filename= --list --local --overwrite "
                     "--resource-version= -l/--selector= " + WRITE),
    "annotate": (False, "--all -A/--all-namespaces --field-selector= -f/--filename= --list --local --overwrite "
                        "--resource-version= -l/--selector= " + WRITE),
    "expose": (False, "--cluster-ip= -f/--filename= -l/--labels= --name= --override-type= --overrides= --port= "
                      "--protocol= --save-config --selector= --session-affinity= --target-port= --type= " + WRITE),
    "autoscale": (False, "-f/--filename= --max= --min= --name= --save-config " + WRITE),
    "cordon": (False, "--dry-run=? -l/--selector="),
    "uncordon": (False, "--dry-run=? -l/--selector="),
    "drain": (False, "--chunk-size= --delete-emptydir-data --disable-eviction --dry-run=? --force --grace-period= "
                     "--ignore-daemonsets --pod-selector= -l/--selector= --skip-wait-for-delete-timeout= --timeout="),
    "taint": (False, "--all --overwrite -l/--selector= --validate=? " + WRITE),
    "run": (False, "--annotations= --cascade=? --command --env= --expose --force --grace-period= --image= "
                   "--image-pull-policy= -l/--labels= --override-type= --overrides= --port= --restart= --save-config "
                   "--timeout= --wait " + WRITE),
    "exec": (False, "-c/--container= --pod-running-timeout= -q/--quiet"),
    "debug": (False, "--arguments-only -c/--container= --copy-to= --env= --image= --image-pull-policy= "
                     "--keep-annotations --keep-init-containers --keep-labels --keep-liveness --keep-readiness "
                     "--keep-startup --profile= -q/--quiet --replace --same-node --set-image= --share-processes "
                     "--target="),
    "rollout": (False, ""),
    "rollout status": (True, "-f/--filename= --revision= -l/--selector= --timeout= -w/--watch"),
    "rollout history": (True, "-f/--filename= --revision= -l/--selector= " + OUT),
    "rollout restart": (False, "-f/--filename= --field-manager= -l/--selector= " + OUT),
    "rollout pause": (False, "-f/--filename= --field-manager= -l/--selector= " + OUT),
    "rollout resume": (False, "-f/--filename= --field-manager= -l/--selector= " + OUT),
    "rollout undo": (False, "-f/--filename= --dry-run=? -l/--selector= --to-revision= " + OUT),
    "set": (False, ""),
    "set env": (False, "-c/--containers= -e/--env= --from= --keys= --list --overwrite --prefix= --resolve "
                       "-l/--selector= " + SET),
    "set image": (False, "-l/--selector= " + SET),
    "set resources": (False, "-c/--containers= --limits= --requests= -l/--selector= " + SET),
    "set selector": (False, "--resource-version= " + SET),
    "set serviceaccount": (False, SET),
    "set subject": (False, "--group= --serviceaccount= --user= -l/--selector= " + SET),
}
# Aliases as kubectl spells them (see `kubectl create --help`).
ALIASES = {
    "top pods": "top pod", "top po": "top pod", "top nodes": "top node", "top no": "top node",
    "create cm": "create configmap", "create deploy": "create deployment", "create cj": "create cronjob",
    "create svc": "create service", "create ns": "create namespace", "create sa": "create serviceaccount",
    "create pdb": "create poddisruptionbudget", "create pc": "create priorityclass",
    "create resourcequota": "create quota", "create ing": "create ingress", "set sa": "set serviceaccount",
}


def _build() -> dict[str, Command]:
    global_flags = flag_table(GLOBAL)
    commands = {path: Command(path, read_only, {**global_flags, **flag_table(spec)}, {})
                for path, (read_only, spec) in _TABLE.items()}
    for path in _TABLE:
        if path:
            parent, _, word = path.rpartition(" ")
            commands[parent].subcommands[word] = path
    for alias, path in ALIASES.items():
        parent, _, word = alias.rpartition(" ")
        commands[parent].subcommands[word] = path
    return commands


COMMANDS = _build()
ROOT = COMMANDS[""]
# Commands that do nothing without a subcommand (kubectl prints their help).
NEEDS_SUBCOMMAND = frozenset({"top", "auth", "rollout", "set", "create secret", "create service"})

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
    "apply edit-last-applied": "needs an interactive editor; use `kubectl apply -f -` with stdin",
    "cluster-info dump": "writes or prints everything at once; use get, describe, events and logs",
    "create secret tls": "reads the certificate and key from files on the tool host; "
                         "use `apply -f -` with a Secret manifest on stdin",
    "create token": "mints credentials, which is not part of the task",
}
# Why a flag that kubectl has is not in the table, so the agent knows what to do instead.
NEVER_RETURNS = "never returns; call the tool again (logs: use --since or --tail)"
INTERACTIVE = "interactive sessions are not supported; run one command: exec POD -- CMD ARGS"
HOST_FILES = "reads files on the tool host, which the agent cannot use; pass manifests on stdin with `-f -`"
FIXED_IDENTITY = "is not allowed: the agent's kubeconfig and identity are fixed"
FLAG_HINTS = {
    **{n: NEVER_RETURNS for n in ("watch", "watch-only", "follow")},
    **{n: INTERACTIVE for n in ("stdin", "tty", "attach", "interactive", "rm", "leave-stdin-open", "edit")},
    **{n: HOST_FILES for n in ("from-file", "from-env-file", "kustomize", "recursive", "patch-file", "custom",
                               "cert", "key")},
    **{n: FIXED_IDENTITY for n in ("kubeconfig", "context", "cluster", "user", "token", "server", "as", "as-group",
                                   "as-uid", "as-user-extra", "certificate-authority", "client-certificate",
                                   "client-key", "insecure-skip-tls-verify", "username", "password",
                                   "tls-server-name", "kuberc")},
    "template": "give the template inline: -o go-template=TEMPLATE or -o jsonpath=TEMPLATE",
    "profile": "profiling writes files on the tool host",
    "profile-output": "profiling writes files on the tool host",
    "cache-dir": "writes files on the tool host",
    "output-directory": "writes files on the tool host",
    "privileged": "is not part of an SRE's role here",
}
_SHORT_NAMES = {"w": "watch", "f": "follow", "i": "stdin", "t": "tty", "k": "kustomize", "R": "recursive",
                "s": "server"}

OUTPUT_FORMATS = frozenset({"json", "yaml", "wide", "name", "plaintext", "plaintext-openapiv2"})
# Inline templates only: go-template-file, templatefile, jsonpath-file, custom-columns-file read files.
INLINE_TEMPLATES = ("jsonpath=", "jsonpath-as-json=", "custom-columns=", "go-template=", "template=")


# What one call may hold. The run record keeps a call's command and stdin whole up to these sizes,
# so the grader reads from the record exactly what kubectl received; longer calls are refused.
MAX_COMMAND_CHARS = 8000
MAX_STDIN_CHARS = 100_000


class KubectlArgsError(ValueError):
    """The arguments are refused; the message tells the agent what to do instead."""


@dataclass(frozen=True)
class KubectlCall:
    """Parsed arguments: ``args`` (canonical) go to kubectl after the fixed kubeconfig flag.

    The same reading, structured: ``flags`` in order (long name, value or None when given bare),
    ``positionals``, and what follows ``--`` (None without it)."""

    args: tuple[str, ...]
    verb: str
    read_only: bool
    command: str = ""  # the whole command path, e.g. "rollout restart"
    flags: tuple[tuple[str, str | None], ...] = ()
    positionals: tuple[str, ...] = ()
    after_dash: tuple[str, ...] | None = None

    def given(self, name: str) -> bool:
        return any(n == name for n, _ in self.flags)

    def value(self, name: str) -> str | None:
        """The value kubectl uses: pflag keeps the last one given (None when absent or given bare)."""
        return next((v for n, v in reversed(self.flags) if n == name), None)

    def is_true(self, name: str) -> bool:
        """A true/false flag as pflag reads it: given bare, or last given a true value."""
        last = next(((n, v) for n, v in reversed(self.flags) if n == name), None)
        return last is not None and (last[1] is None or last[1].lower() in ("1", "t", "true"))

    @property
    def arguments(self) -> tuple[str, ...]:
        """What the command receives as arguments: positionals, then what follows ``--``."""
        return self.positionals + (self.after_dash or ())


def command_chars(command: str | list[str]) -> int:
    """The length of a command as given: the string, or the words of a list with a space between."""
    return len(command) if isinstance(command, str) else sum(len(str(p)) + 1 for p in command)


def split_command(command: str | list[str]) -> list[str]:
    """Accept ``"get pods -n x"``, ``"kubectl get pods"`` or ``["get", "pods"]``."""
    if command_chars(command) > MAX_COMMAND_CHARS:
        raise KubectlArgsError(f"the command is longer than {MAX_COMMAND_CHARS} characters; "
                               "put a long patch or manifest on stdin with `apply -f -`")
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
    if any("\0" in p for p in parts):
        raise KubectlArgsError("arguments cannot contain NUL characters")
    return parts


def _normalize(name: str) -> str:
    return name.replace("_", "-")  # kubectl's WordSepNormalizeFunc


def _refuse_flag(spelled: str, name: str | None, cmd: Command) -> KubectlArgsError:
    where = f"`kubectl {cmd.path}`" if cmd.path else "kubectl before the command"
    hint = FLAG_HINTS.get(name or "")
    if hint:
        return KubectlArgsError(f"{spelled} {hint}")
    allowed = ", ".join(f"-{f.short}/--{f.name}" if f.short else f"--{f.name}" for f in
                        sorted(cmd.flags.values(), key=lambda f: f.name))
    return KubectlArgsError(f"{spelled} is not available for {where}; its flags here: {allowed}")


# -- finding the command, as cobra does -------------------------------------------------------
def _takes_next(arg: str, cmd: Command) -> bool:
    """Does cobra's stripFlags treat ``arg`` as a flag whose value is the next argument?"""
    if arg.startswith("--") and "=" not in arg:
        flag = cmd.flags.get(_normalize(arg[2:]))
        if flag is None:
            raise _refuse_flag(arg, _normalize(arg[2:]), cmd)
        return flag.kind == "value"
    if arg.startswith("-") and "=" not in arg and len(arg) == 2:
        flag = cmd.by_short(arg[1])
        if flag is None:
            raise _refuse_flag(arg, _SHORT_NAMES.get(arg[1]), cmd)
        return flag.kind == "value"
    return False


def _first_word(args: list[str], cmd: Command) -> tuple[str, int] | None:
    """The first argument cobra would take as a (sub)command name, and its index."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return None
        if arg.startswith("-"):
            i += 2 if _takes_next(arg, cmd) else 1
            continue
        if arg:  # cobra skips empty arguments
            return arg, i
        i += 1
    return None


def find_command(parts: list[str]) -> tuple[Command, list[str]]:
    """The command cobra runs for ``parts`` and the arguments left for its flags and positionals."""
    cmd, rest = ROOT, list(parts)
    while True:
        found = _first_word(rest, cmd)
        if found is None:
            break
        word, at = found
        path = f"{cmd.path} {word}".strip()
        if path in REFUSED_VERBS:
            raise KubectlArgsError(f"`kubectl {path}` is not available: it {REFUSED_VERBS[path]}")
        sub = cmd.subcommands.get(word)
        if sub is None:
            if cmd is ROOT:
                raise KubectlArgsError(f"unknown or unsupported kubectl verb {word!r}; supported: "
                                       f"{', '.join(sorted(ROOT.subcommands))}")
            if cmd.subcommands:  # kubectl may know more subcommands than are allowed here
                raise KubectlArgsError(f"`kubectl {path}` is not available; `kubectl {cmd.path}` takes one of: "
                                       f"{', '.join(sorted(cmd.subcommands))}"
                                       + (" (or `-f -` with the manifest on stdin)" if cmd.path in ("create", "apply")
                                          else ""))
            break
        cmd, rest = COMMANDS[sub], rest[:at] + rest[at + 1:]
    if cmd is ROOT:
        raise KubectlArgsError("no kubectl verb found (e.g. get, describe, logs, rollout, scale, patch)")
    if cmd.path in NEEDS_SUBCOMMAND:
        subs = ", ".join(sorted(cmd.subcommands))
        raise KubectlArgsError(f"`kubectl {cmd.path}` needs one of: {subs}")
    return cmd, rest


# -- reading the flags, as pflag does ---------------------------------------------------------
def _check_output(value: str) -> None:
    if value not in OUTPUT_FORMATS and not (value.startswith(INLINE_TEMPLATES) and "=" in value):
        raise KubectlArgsError(f"-o {value!r} is not allowed: use json, yaml, wide, name, or an inline template "
                               "(jsonpath=..., jsonpath-as-json=..., custom-columns=..., go-template=...); "
                               "template files on the tool host are not available")


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise KubectlArgsError(f"the value {value!r} is not allowed here; use one of: {', '.join(allowed)}")
    return check


def _check_raw(value: str) -> None:
    if not value.startswith("/") or value.startswith("//"):
        raise KubectlArgsError("--raw takes an API path starting with /, e.g. --raw /apis/metrics.k8s.io/v1beta1/pods")


def _check_verbosity(value: str) -> None:
    if not re.fullmatch(r"\d{1,2}", value):
        raise KubectlArgsError("-v takes a log level, 0 to 10")


VALUE_CHECKS: dict[str, Callable[[str], None]] = {
    "output": _check_output, "raw": _check_raw, "v": _check_verbosity,
    "dry-run": _one_of("none", "server", "client", "unchanged"),
    "validate": _one_of("strict", "warn", "ignore", "true", "false"),
    "cascade": _one_of("background", "orphan", "foreground", "true", "false"),
}
# --profile of `kubectl debug` is the debug container's security profile, not Go profiling.
DEBUG_PROFILES = _one_of("general", "baseline", "restricted")


def _check_value(flag: Flag, value: str, cmd: Command, stdin: bool) -> None:
    if flag.name == "filename":
        if value != "-":
            raise KubectlArgsError("only `-f -` is allowed (the manifest goes in the `stdin` argument); "
                                   "files and URLs are not read from the tool host")
        if not stdin:
            raise KubectlArgsError("`-f -` needs the manifest in the `stdin` argument")
    elif flag.name == "profile" and cmd.path == "debug":
        DEBUG_PROFILES(value)
    elif flag.name in VALUE_CHECKS:
        VALUE_CHECKS[flag.name](value)


Flags = list[tuple[str, str | None]]


def _read_flags(args: list[str], cmd: Command, stdin: bool) -> tuple[Flags, list[str], list[str] | None]:
    """pflag's reading of ``args``: (flags as (long name, value), positionals, what follows ``--`` or None)."""
    flags: Flags = []
    positionals: list[str] = []
    i = 0

    def accept(flag: Flag, value: str | None, spelled: str) -> None:
        if value is not None:
            if flag.kind == "bool" and value.lower() not in ("1", "t", "true", "0", "f", "false"):
                raise KubectlArgsError(f"{spelled} is a true/false flag; {value!r} is not a boolean")
            _check_value(flag, value, cmd, stdin)
        flags.append((flag.name, value))

    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            return flags, positionals, args[i:]
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        if arg.startswith("--"):
            body = arg[2:]
            if not body or body[0] in "-=":
                raise KubectlArgsError(f"bad flag syntax: {arg}")
            name, eq, value = body.partition("=")
            flag = cmd.flags.get(_normalize(name))
            if flag is None:
                raise _refuse_flag(arg, _normalize(name), cmd)
            if eq:
                accept(flag, value, arg)
            elif flag.kind == "value":
                if i >= len(args):
                    raise KubectlArgsError(f"{arg} needs a value")
                accept(flag, args[i], arg)
                i += 1
            else:
                accept(flag, None, arg)
            continue
        shorts = arg[1:]
        while shorts:  # combined short flags: -Rf x, -Rfx, -n=x, -nx
            letter, shorts = shorts[0], shorts[1:]
            flag = cmd.by_short(letter)
            if flag is None:
                raise _refuse_flag(f"-{letter}" + (f" (in {arg})" if len(arg) > 2 else ""),
                                   _SHORT_NAMES.get(letter), cmd)
            if shorts.startswith("=") and len(shorts) > 1:
                accept(flag, shorts[1:], arg)
                shorts = ""
            elif flag.kind != "value":
                accept(flag, None, arg)
            elif shorts:
                accept(flag, shorts, arg)
                shorts = ""
            elif i < len(args):
                accept(flag, args[i], arg)
                i += 1
            else:
                raise KubectlArgsError(f"-{letter} needs a value")
    return flags, positionals, None


def parse_kubectl(command: str | list[str], *, stdin: str | None = None) -> KubectlCall:
    """Validate one kubectl invocation, classify it (read-only or not), and give its canonical arguments."""
    if stdin is not None and len(stdin) > MAX_STDIN_CHARS:
        raise KubectlArgsError(f"stdin holds {len(stdin)} characters; at most {MAX_STDIN_CHARS} are accepted: "
                               "apply the manifest in parts")
    parts = split_command(command)
    cmd, rest = find_command(parts)
    flags, positionals, after_dash = _read_flags(rest, cmd, bool(stdin))  # an empty stdin is none
    canonical = [f"--{name}" if value is None else f"--{name}={value}" for name, value in flags]
    args = (*cmd.path.split(), *canonical, *positionals, *(("--", *after_dash) if after_dash is not None else ()))
    return KubectlCall(args=args, verb=cmd.path.split()[0], read_only=cmd.read_only, command=cmd.path,
                       flags=tuple(flags), positionals=tuple(positionals),
                       after_dash=tuple(after_dash) if after_dash is not None else None)
