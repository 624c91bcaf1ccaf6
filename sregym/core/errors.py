"""Errors a user can act on. Each type carries the exit code the CLI returns for it.

Exit codes (also in README.md):
  0  success (for `run`: the run completed and a record was written, whatever the grade)
  1  internal error (a bug: please report it with the traceback from --debug)
  2  bad input: a problem file, parameter, id or flag is wrong (nothing was changed)
  3  cluster error: the cluster is unreachable, unhealthy, or lacks a permission
  4  missing prerequisite on this host (not root, a tool missing, a port in use)
  5  a fault could not be applied or verified (the run was rolled back)
  130 interrupted (Ctrl-C); run `sregym cleanup` if a run was in flight
"""

from __future__ import annotations


class SregymError(Exception):
    """Base of every error sregym reports as one clear message instead of a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserInputError(SregymError):
    """A file, field, id, parameter or flag the user gave is wrong."""

    exit_code = 2


class ProblemFileError(UserInputError):
    """A problem file fails to parse or validate; names the file, line and field."""

    def __init__(self, path: str, message: str, *, line: int | None = None, field: str | None = None,
                 hint: str | None = None) -> None:
        where = path if line is None else f"{path}:{line}"
        what = f"{where}: {field}: {message}" if field else f"{where}: {message}"
        super().__init__(what, hint=hint)
        self.path, self.line, self.field = path, line, field


class UnknownNameError(UserInputError):
    """An unknown problem id, injector, oracle, agent, app or suite name."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        import difflib

        close = difflib.get_close_matches(name, known, n=3)
        listed = f"known {kind}s: {', '.join(sorted(known)[:20])}" if known else f"no {kind}s are registered"
        hint = f"did you mean {', '.join(close)}? {listed}" if close else listed
        super().__init__(f"unknown {kind} {name!r}", hint=hint)
        self.kind, self.name = kind, name


class ClusterError(SregymError):
    """The cluster is unreachable, unhealthy or refuses what sregym needs."""

    exit_code = 3


class PrerequisiteError(SregymError):
    """Something this host must provide is missing (root, a binary, a free port, a kernel feature)."""

    exit_code = 4


class FaultError(SregymError):
    """A fault could not be injected, verified or recovered."""

    exit_code = 5


class MechanismUnavailable(FaultError):
    """No mechanism of an injector works on the target node (or the forced one does not)."""
