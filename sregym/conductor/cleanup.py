"""``sregym cleanup``: undo whatever crashed or killed runs left behind, from their journals.

For each run whose journal is not closed, the open intents are rebuilt into injectors (registry
lookup + journaled params, target, mechanism and planned state) and recovered newest first.
``recover`` is idempotent, so an intent whose inject never ran, or ran halfway, is safe to undo.
First the run's agent is stopped: its helper processes (API proxy, metrics view, tool server), each
with its process group and only while it is still the process journaled (pid, start time, command
line; :func:`sregym.cluster.owned_processes.stop`), and its sandbox namespace (every agent pod in it). Then every object the run labelled (``RUN_LABEL=<run id>``) in the hidden namespace and the app
namespace is deleted and the agent's access to the app namespace is revoked. Last, when the run was
killed during or after its agent phase, what the agent made is torn down as the run itself would
have (``agent_objects.teardown`` against the snapshot journaled before the agent started): objects
it created are deleted, release objects it changed are reported. Only now, with the agent unable to
act, so it cannot make anything again. The journal is closed when all of it succeeded; every step
is idempotent, so a second cleanup after a partial one finishes the job and one after a full one
finds nothing open. A namespace that a live run (another journal, its process alive) works in is
left to that run: neither its agent's access nor its objects are touched.

Apart from journals, the helper processes that belong to a killed sregym process rather than to one
of its runs (its port-forwards to the observability stack) are stopped from their records
(:func:`stop_orphan_helpers`), each only while it is still the very process recorded; and the
private scratch folders a killed run's API proxy and tool server left in
the temp folder are swept (:func:`sweep_scratch`): only those whose owning process is gone and that
no live process works in.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sregym.agentplane.sandbox import delete_sandbox_namespace
from sregym.cluster.agent_access import revoke_agent_access
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.owned_processes import ProcessIdentity, stop, stop_orphans
from sregym.cluster.scratch import sweep_stale_scratch
from sregym.conductor import agent_objects
from sregym.conductor.faultplane import build_injector
from sregym.conductor.journal import Journal, JournaledProcess, RunHeader, RunJournal, open_journals
from sregym.core.constants import RUN_LABEL
from sregym.core.record import AgentObject
from sregym.core.registry import import_path

# Kinds an injector may create; deleted by run label. Namespaced only (cluster objects are not
# created by injectors).
LABELLED_KINDS = ("deployments,daemonsets,statefulsets,jobs,pods,configmaps,secrets,services,networkpolicies,"
                  "serviceaccounts,roles,rolebindings,resourcequotas,limitranges,persistentvolumeclaims")


@dataclass
class RunCleanup:
    run_id: str
    recovered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None
    closed: bool = False
    stopped: list[str] = field(default_factory=list)
    agent_objects: list[AgentObject] = field(default_factory=list)  # what the killed run's agent made or changed


def _process_alive(header: RunHeader) -> bool:
    """Whether the run's own process still lives (then cleanup must not race it): the process at
    its pid started when the run's did. A journal of an older sregym has no start time: then any
    process at that pid whose command line names sregym counts (a recycled pid may be taken for it)."""
    if header.pid == os.getpid():
        return False
    now = ProcessIdentity.of(header.pid)
    if now is None:
        return False
    if header.pid_start is not None:
        return now.start == header.pid_start
    return any("sregym" in arg for arg in now.cmdline)


def journaled_identity(process: JournaledProcess) -> ProcessIdentity | None:
    """What the journaled helper is: its pid, start time and command line as journaled. An older
    sregym's entry has no command line: the process now at its pid, if its command line names what
    was journaled and its start time is the one journaled (none journaled, older still: if it started
    before the entry was written, so it held that pid already). None when that is not it."""
    if process.start is not None and process.cmdline is not None:
        return ProcessIdentity(process.pid, process.start, process.cmdline)
    now = ProcessIdentity.of(process.pid)
    if now is None or not process.what or process.what not in " ".join(now.cmdline):
        return None
    if process.start is not None:
        return now if now.start == process.start else None
    return now if now.started_by(process.journaled_at) else None


def stop_processes(processes: Iterable[JournaledProcess]) -> list[str]:
    """Stop the run's helper processes, each with its process group, while it is still the process
    journaled (:func:`sregym.cluster.owned_processes.stop`); what was stopped, "<what> (<pid>)"."""
    stopped = []
    for process in processes:
        identity = journaled_identity(process)
        if identity is not None and stop(identity, group=True):
            stopped.append(f"{process.what} ({process.pid})")
    return stopped


def delete_labelled(kube: Any, run_id: str, namespaces: set[str]) -> None:
    """Delete every namespaced object labelled with this run, in each namespace."""
    for ns in sorted(namespaces):
        kube.kubectl("delete", LABELLED_KINDS, "-n", ns, "-l", f"{RUN_LABEL}={run_id}",
                     "--ignore-not-found", "--wait=false", check=False)


def journaled_snapshot(rj: RunJournal) -> agent_objects.Snapshot | None:
    """The app namespace as the run journaled it before its agent started; None if it never got there.
    ValueError when the entry is of another sregym's format."""
    return agent_objects.Snapshot.from_dict(rj.before_agent.snapshot) if rj.before_agent else None


def app_namespaces(rj: RunJournal) -> set[str]:
    """The namespaces the run's app (and so its agent) lived in."""
    found = {i.app_namespace for i in rj.intents}
    if rj.before_agent and isinstance(rj.before_agent.snapshot.get("namespace"), str):
        found.add(rj.before_agent.snapshot["namespace"])
    return found


def remove_agent_objects(kube: Any, before: agent_objects.Snapshot, release: str
                         ) -> tuple[list[AgentObject], list[str]]:
    """Tear down what the agent made since ``before``; with an error for each object left in place."""
    try:
        found = agent_objects.teardown(ClusterHandle.of(kube), before, release)
    except Exception as e:  # noqa: BLE001 - report and keep undoing the rest
        return [], [f"removing what the agent made in {before.namespace}: {e}"]
    return found, [f"deleting the agent's {o.resource}/{o.name} in {o.namespace}: {o.error}"
                   for o in found if o.change == "created" and not o.removed]


def cleanup_run(rj: RunJournal, kube: Any, *, directory: Path | None = None, force: bool = False,
                busy: dict[str, str] | None = None) -> RunCleanup:
    """Recover one run's open intents newest first; close its journal when nothing is left.
    ``busy``: namespace -> id of a live run working there, whose agent access and objects stay."""
    result = RunCleanup(rj.run_id)
    if rj.header and not force and _process_alive(rj.header):
        result.skipped = f"its process {rj.header.pid} is still running (stop it first, or pass --force)"
        return result
    try:
        before = journaled_snapshot(rj)
    except ValueError as e:
        before = None
        result.errors.append(f"reading the app namespace journaled before the agent started: {e}")
    journal = Journal(rj.run_id, directory or rj.path.parent)
    result.stopped = stop_processes(rj.helpers.values())
    for namespace in rj.sandboxes if kube is not None else []:  # the agent must not outlive its run
        try:
            delete_sandbox_namespace(kube, namespace)
            result.stopped.append(f"sandbox {namespace}")
        except Exception as e:  # noqa: BLE001 - report and keep undoing the rest
            result.errors.append(f"deleting the agent's sandbox namespace {namespace}: {e}")
    for folder in rj.header.plugins if rj.header else []:
        if Path(folder).is_dir():  # the run's own plug-in injectors, so they can be rebuilt
            import_path(Path(folder))
    for intent in reversed(rj.open_intents):
        try:
            inj = build_injector(intent, kube)
            inj.recover(inj.load_state(intent.state))
        except Exception as e:  # noqa: BLE001 - report and keep undoing the rest
            result.errors.append(f"{intent.key} ({intent.injector}): {e}")
            journal.recover_failed(intent.key, str(e))
            continue
        journal.recovered(intent.key)
        result.recovered.append(intent.key)
    if kube is not None:
        apps = app_namespaces(rj)
        live = {ns: run_id for ns, run_id in (busy or {}).items() if run_id != rj.run_id}
        try:
            delete_labelled(kube, rj.run_id, {i.hidden_namespace for i in rj.intents} | apps)
        except Exception as e:  # noqa: BLE001
            result.errors.append(f"deleting objects labelled {RUN_LABEL}={rj.run_id}: {e}")
        for ns in sorted(apps):
            if ns in live:
                result.errors.append(f"namespace {ns} is in use by the live run {live[ns]}: its agent's access and "
                                     "objects are left to it; run cleanup again when it has ended")
                continue
            try:  # the killed run's agent credentials must not outlive it
                revoke_agent_access(kube, ns)
            except Exception as e:  # noqa: BLE001
                result.errors.append(f"revoking the agent's access to {ns}: {e}")
        # last: the agent is stopped and its access gone, so it cannot make anything again
        if before is not None and rj.before_agent and before.namespace not in live:
            result.agent_objects, errors = remove_agent_objects(kube, before, rj.before_agent.release)
            result.errors += errors
    if not result.errors:
        journal.close()
        result.closed = True
    return result


def cleanup_all(kube_for: Callable[[RunHeader | None], Any], *, directory: Path | None = None,
                force: bool = False) -> list[RunCleanup]:
    """Clean every open journal, newest run first (a later run may have built on an earlier one)."""
    journals = open_journals(directory)
    busy = {} if force else {ns: rj.run_id for rj in journals if rj.header and _process_alive(rj.header)
                             for ns in app_namespaces(rj)}
    return [cleanup_run(rj, kube_for(rj.header), directory=directory, force=force, busy=busy)
            for rj in reversed(journals)]


def stop_orphan_helpers(directory: Path | None = None) -> tuple[list[str], list[str]]:
    """Stop the helper processes (port-forwards) of sregym processes that were killed, by pid, each
    only while its start time and command line are still the ones recorded; (stopped, errors)."""
    return stop_orphans(directory)


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders (``sregym-agentproxy-*``, ``sre-tools-*``) of processes that are
    gone; a live run's stay (:mod:`sregym.cluster.scratch`). Runs after :func:`cleanup_all` stopped
    the killed runs' helper processes, so their folders are free by then."""
    return sweep_stale_scratch(root)
