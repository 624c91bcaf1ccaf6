"""Which objects a kubectl call acted on or read, as kubectl itself picks them.

The call is read with the tool server's own grammar (:mod:`sregym.core.kubectl_args`), so the
grader and the server cannot disagree on flags and arguments; this module adds what kubectl does
with the arguments once the flags are read: its resource builder (``TYPE NAME...``,
``TYPE/NAME...``, ``TYPE1,TYPE2 NAME``, a lone ``TYPE`` for all of them), label and field
selectors, the manifest on stdin (every object, list items included), and the words some commands
take that are not objects (``KEY=VAL`` of ``label``/``set env``, ``container=image``, taints).

Where kubectl would refuse a form, the reading errs towards more objects: it can only make a
failed call look wider, never hide what a call that ran touched.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from sregym.core.kubectl_args import KubectlArgsError, KubectlCall, parse_kubectl
from sregym.core.trajectory import ToolCall

# kubectl commands that change nothing the grader judges: a throwaway pod (but `debug --copy-to=X
# --replace` deletes the pod it copies) and looking inside a pod (but an `exec` whose command may
# change the container, `kill 1` or `rm`, is a write on that pod: see ``exec_only_reads``).
INVESTIGATION = frozenset({"exec", "debug", "run"})
# Programs that only read, run inside a pod by `exec`; with the flags that would make one write.
# Anything else (a shell script not read, kill, rm, a database client, awk...) may change the pod.
_READING_PROGRAMS = frozenset({
    "cat", "head", "tail", "ls", "stat", "df", "du", "ps", "top", "env", "printenv", "id", "whoami",
    "hostname", "uname", "date", "uptime", "free", "vmstat", "iostat", "netstat", "ss", "nslookup", "dig",
    "host", "getent", "ping", "traceroute", "wc", "grep", "egrep", "fgrep", "sort", "uniq", "cut", "echo",
    "printf", "true", "pwd", "which", "find", "curl", "wget", "nc", "mount", "lsof", "file", "md5sum",
    "sha256sum", "journalctl", "dmesg"})
_WRITING_FLAGS = {
    "find": ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "curl": ("-X", "--request", "-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "-F",
             "--form", "-T", "--upload-file", "-o", "--output", "-O", "--remote-name", "-K", "--config"),
    "wget": ("--post-data", "--post-file", "--method", "--body-data", "--body-file", "-o", "--output-file",
             "-O", "--output-document"),  # wget writes a file unless told -O- (below)
    "top": ("-w",), "dmesg": ("-c", "-C", "--clear", "-n"), "mount": ("-o", "--bind", "-t"),
    "hostname": ("-F", "--file"), "date": ("-s", "--set"), "nc": ("-l", "-e", "-c"),
}
_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "busybox"})


def exec_only_reads(argv: list[str]) -> bool:
    """Whether the command an ``exec`` runs only reads: a reading program without writing flags, or
    ``sh -c`` with a script made only of such commands joined by ``|``, ``;``, ``&&``, ``||`` (no
    redirection, no command substitution). Unreadable means it may write."""
    if not argv:
        return False
    program, args = argv[0].rpartition("/")[2], argv[1:]
    if program == "busybox" and args:
        return exec_only_reads(args)
    if program in _SHELLS:
        if len(args) != 2 or args[0] != "-c" or re.search(r"[<>`$&]", args[1].replace("&&", "")):
            return False
        try:
            return all(exec_only_reads(shlex.split(part)) for part in re.split(r"\|\||&&|[;|\n]", args[1])
                       if part.strip())
        except ValueError:
            return False
    if program not in _READING_PROGRAMS:
        return False
    if program == "wget":  # it saves the page to a file in the pod unless told to print it (-O-)
        args, printed = _without_stdout_output(args)
        if not printed:
            return False
    writing = _WRITING_FLAGS.get(program, ())
    for a in args:
        name = a.split("=", 1)[0]
        if name in writing:
            return False
        if program != "find" and re.fullmatch(r"-[A-Za-z]{2,}", name) and any(f"-{c}" in writing for c in name[1:]):
            return False  # combined short flags, -sX
    return True


def _without_stdout_output(args: list[str]) -> tuple[list[str], bool]:
    """wget's arguments without an output to standard output (``-O-``, ``-qO-``, ``-O -``,
    ``--output-document=-``), and whether there was one."""
    out, printed, skip = [], False, False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if re.fullmatch(r"-[a-zA-Z]*O-", a) or a == "--output-document=-":
            printed = True
            out += [f"-{a[1:-2]}"] if len(a) > 3 else []
        elif a in ("-O", "--output-document") and i + 1 < len(args) and args[i + 1] == "-":
            printed, skip = True, True
        else:
            out.append(a)
    return out, printed
_DRY_RUNS = ("client", "server", "unchanged")  # "unchanged" is --dry-run given bare: a client dry run
_NODE_COMMANDS = frozenset({"cordon", "uncordon", "drain"})
# Commands whose --selector is a field of what they create, not a filter of what they act on.
_SELECTOR_IS_CONTENT = frozenset({"expose", "create poddisruptionbudget"})
_EVENT_TYPES = frozenset({"event", "events", "ev"})


@dataclass
class Reach:
    """The objects of one call: ``names`` outright, ``selected`` by selectors (each entry the values of
    one requirement that narrows the selection, ``app=geo`` or ``app in (a,b)``), or ``everything``
    of a type (``--all``, a lone ``TYPE``, a selector that narrows nothing, a manifest unread)."""

    names: list[str] = field(default_factory=list)
    selected: list[tuple[str, ...]] = field(default_factory=list)
    everything: bool = False
    types: list[str] = field(default_factory=list)


def read_call(call: ToolCall) -> tuple[KubectlCall, str | None] | None:
    """The kubectl call a recorded tool call ran, and its stdin; None when it cannot be read.

    Only ``command`` and ``stdin`` count: they are the tool's parameters, and the server ignores
    anything else an agent sends along.
    """
    command = call.arguments.get("command")
    stdin = call.arguments.get("stdin")
    if not isinstance(command, (str, list)) or not (stdin is None or isinstance(stdin, str)):
        return None
    try:
        return parse_kubectl(command, stdin=stdin), stdin
    except (KubectlArgsError, TypeError):
        return None


def changes_something(kc: KubectlCall) -> bool:
    """Whether the call may change the cluster: a write command, not a dry run, not ``--local``, not ``--list``."""
    if kc.verb == "exec":
        return not exec_only_reads(list(kc.after_dash or ()))
    if kc.read_only or (kc.verb in INVESTIGATION and not (kc.verb == "debug" and kc.is_true("replace"))):
        return False
    if kc.given("dry-run") and (kc.value("dry-run") or "unchanged") in _DRY_RUNS:
        return False
    return not (kc.is_true("local") or kc.is_true("list"))


# -- kubectl's resource builder --------------------------------------------------------------------------
def _builder(words: list[str]) -> Reach:
    """``ResourceTypeOrNameArgs`` of k8s.io/cli-runtime: the types and names in a command's arguments."""
    words = [w for w in words if w]
    if not words:
        return Reach()
    types = words[0].split(",")
    if len(words) >= 2 and len(types) > 1:  # deploy,svc geo -> deploy/geo svc/geo
        words = [f"{t}/{n}" for t in types for n in words[1:]]
    if any("/" in w for w in words):
        pairs = [w.partition("/") for w in words]
        return Reach(names=[name or kind for kind, _, name in pairs], types=[kind for kind, _, _ in pairs])
    if len(words) == 1:
        return Reach(everything=True, types=types)
    return Reach(names=words[1:], types=types)


def _is_pair(word: str) -> bool:
    """``KEY=VAL`` or ``KEY-`` of label, annotate and set env (kubectl's GetResourcesAndPairs)."""
    return ("=" in word and not word.startswith("=")) or (word.endswith("-") and word != "-")


def _resource_words(path: str, words: list[str]) -> list[str]:
    """The words of a command's arguments that name resources."""
    if path in ("label", "annotate", "set env"):
        return [w for w in words if not _is_pair(w)]
    if path == "set image":
        return [w for w in words if "=" not in w]  # container=image
    if path in ("set selector", "set serviceaccount"):
        return words[:-1]  # the last word is the selector or the account
    if path == "taint":
        return [w for w in words if not ("=" in w or ":" in w or (w.endswith("-") and w != "-"))]
    return words


# -- selectors ---------------------------------------------------------------------------------------------
_KEY = r"[^\s!=<>(),]+"
_EQUALS = re.compile(rf"^\s*{_KEY}\s*==?\s*([^\s!=<>(),]+)\s*$")
_IN = re.compile(rf"^\s*{_KEY}\s+in\s*\(([^()]*)\)\s*$")


def _requirements(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in [*parts, current] if p.strip()]


def label_values(selector: str) -> list[tuple[str, ...]]:
    """The values of each requirement that narrows a label selector to some values (``k=v``, ``k==v``,
    ``k in (a,b)``); ``!=``, ``notin``, ``k``, ``!k``, ``<`` and ``>`` narrow nothing by name."""
    out: list[tuple[str, ...]] = []
    for req in _requirements(selector):
        if m := _EQUALS.match(req):
            out.append((m.group(1),))
        elif (m := _IN.match(req)) and all(v.strip() for v in m.group(1).split(",")):
            out.append(tuple(v.strip() for v in m.group(1).split(",")))
    return out


_NAME_FIELDS = frozenset({"metadata.name", "involvedObject.name", "regarding.name"})


def field_names(selector: str) -> list[tuple[str, ...]]:
    """The names a field selector narrows to: ``metadata.name=x``, and for events ``involvedObject.name=x``."""
    out: list[tuple[str, ...]] = []
    for req in selector.split(","):
        key, op, value = re.split(r"(==|!=|=)", req, maxsplit=1) if "=" in req else (req, "", "")
        if op in ("=", "==") and value.strip() and key.strip() in _NAME_FIELDS:
            out.append((value.strip(),))
    return out


def _selected(kc: KubectlCall, labels_filter: bool) -> tuple[bool, list[tuple[str, ...]]]:
    """(whether the call selects by label or field, what it narrows to)."""
    selecting, narrowed = False, []
    if labels_filter and kc.given("selector"):
        selecting = True
        narrowed += label_values(kc.value("selector") or "")
    if kc.given("field-selector"):
        selecting = True
        narrowed += field_names(kc.value("field-selector") or "")
    return selecting, narrowed


# -- the manifest on stdin ---------------------------------------------------------------------------------
class _ManifestLoader(yaml.SafeLoader):
    """Keeps every value of a repeated key (as a list): Go's readers keep the last, a strict server
    may refuse the object, and the grader must see every name any of them could use."""


def _multi_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, list[Any]]:
    loader.flatten_mapping(node)
    pairs = [(loader.construct_object(k, deep=True), loader.construct_object(v, deep=True)) for k, v in node.value]
    return _group([(k if isinstance(k, (str, int, float, bool)) else str(k), v) for k, v in pairs])


_ManifestLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _multi_mapping)


def _documents(text: str) -> list[Any]:
    """The documents kubectl reads from stdin: a JSON stream when it opens with ``{``, YAML otherwise."""
    docs: list[Any] = []
    rest = text.lstrip()
    if rest.startswith("{"):
        decoder = json.JSONDecoder(object_pairs_hook=_group)
        at = 0
        try:
            while at < len(rest) and rest[at] == "{":
                doc, at = decoder.raw_decode(rest, at)
                docs.append(doc)
                while at < len(rest) and rest[at].isspace():
                    at += 1
            rest = rest[at:]
        except ValueError:  # YAML's flow style, which newer kubectl reads too
            docs = []
    if rest.strip():
        docs.extend(yaml.load_all(rest, Loader=_ManifestLoader))  # noqa: S506 - a SafeLoader
    return docs


def _group(pairs: list[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    """A mapping that keeps every value of a repeated key, in order."""
    out: dict[Any, list[Any]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _object_names(node: Any, into: list[str], seen: set[int]) -> bool:
    """Add the names of an object and of its items (kubectl reads anything with ``items`` as a list);
    False when an object has no name to read. Each node once: YAML aliases may share one many times."""
    if isinstance(node, (list, dict)):
        if id(node) in seen:
            return True
        seen.add(id(node))
    if isinstance(node, list):
        return all([_object_names(item, into, seen) for item in node])
    if not isinstance(node, dict):
        return node is None
    found = False
    for meta in node.get("metadata", []):
        for key in ("name", "generateName"):
            for name in meta.get(key, []) if isinstance(meta, dict) else []:
                if name not in (None, ""):
                    into.append(str(name))
                    found = True
    named_items = True
    for items in node.get("items", []):
        if items is not None:
            found = True
            named_items = _object_names(items, into, seen) and named_items
    return found and named_items


def manifest_names(stdin: str | None) -> list[str] | None:
    """The object names of a manifest (each document, list items too); None when it cannot be read."""
    names: list[str] = []
    seen: set[int] = set()
    try:
        docs = _documents(stdin or "")
        return names if all([_object_names(doc, names, seen) for doc in docs]) else None
    except (ValueError, yaml.YAMLError, RecursionError):
        return None


# -- what a call acted on, what it read --------------------------------------------------------------------
def acted_on(kc: KubectlCall, stdin: str | None) -> Reach:
    """The objects a write call acts on (creates, changes, deletes)."""
    path, words = kc.command, list(kc.arguments)
    reach = Reach()
    if path in _NODE_COMMANDS:
        reach.names += words
    elif path == "exec":  # POD or TYPE/NAME, then the command it runs inside
        reach.names += [kc.positionals[0].rpartition("/")[2]] if kc.positionals else []
    elif path == "debug":  # POD or TYPE/NAME, then the command to run; the copy is a new pod
        reach.names += [words[0].rpartition("/")[2]] if words else []
        if copy := kc.value("copy-to"):
            reach.names.append(copy)
    elif path.startswith("create ") and words:
        reach.names.append(words[0])  # the new object's name
    elif not path.startswith("create "):
        built = _builder(_resource_words(path, words))
        reach.names += built.names
        reach.everything = built.everything
    if kc.given("filename"):
        listed = manifest_names(stdin)
        reach.names += listed if listed is not None else []
        reach.everything = reach.everything or listed is None
    selecting, narrowed = _selected(kc, path not in _SELECTOR_IS_CONTENT)
    if selecting and not kc.given("filename"):  # with -f a selector only filters the manifest
        reach.selected += narrowed
        reach.everything = not narrowed and not reach.names
    if path in ("expose", "autoscale") and (new := kc.value("name")):
        # expose makes a Service and changes nothing else; autoscale's HPA also scales what it names
        reach.names = [new] if path == "expose" else [*reach.names, new]
        reach.everything = reach.everything and path == "autoscale"
    if kc.is_true("all") and path != "apply":  # apply's --all only widens --prune, which is not allowed
        reach.everything = True
    return reach


def read_objects(kc: KubectlCall, stdin: str | None) -> Reach:
    """The objects a read call names (a lone ``TYPE`` names none): what it can be said to have looked at."""
    path, words = kc.command, list(kc.arguments)
    reach = Reach()
    if path == "logs":
        reach.names += [words[0].rpartition("/")[2]] if words else []  # POD or TYPE/NAME; then a container
    elif path in ("top pod", "top node"):
        reach.names += words
    elif path == "events":
        reach.names += [v.rpartition("/")[2] for n, v in kc.flags if n == "for" and v]
    elif path in ("get", "describe"):
        built = _builder(words)
        reach.names += built.names
        reach.types = built.types
        if kc.given("filename"):
            reach.names += manifest_names(stdin) or []
    _, narrowed = _selected(kc, True)
    reach.selected += narrowed
    return reach


def reads_events(kc: KubectlCall) -> bool:
    """``kubectl events``, or ``get`` of the Event type."""
    if kc.command == "events":
        return True
    types = read_objects(kc, None).types if kc.command == "get" else []
    return any(t.lower().split(".")[0] in _EVENT_TYPES for t in types)
