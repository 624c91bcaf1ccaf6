"""Load problems and suites from YAML, with errors that name the file, the line and the field.

A problem is ``<dir>/<id>.yaml``; a suite is ``<dir>/suites/<name>.yaml``. The repository's
``problems/`` folder is always searched; ``--problems-dir`` adds more. YAML is composed into nodes
first so that a pydantic error location (``faults.0.params.port``) maps back to the line where
that field (or, when it is missing, its parent) was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sregym.core.errors import ProblemFileError, UnknownNameError
from sregym.core.problem import Problem, Suite

M = TypeVar("M", bound=BaseModel)

REPO_PROBLEMS_DIR = Path(__file__).resolve().parents[2] / "problems"


def format_loc(loc: Sequence[str | int]) -> str:
    """``("faults", 0, "params", "port")`` -> ``faults[0].params.port`` (how a user reads YAML)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


@dataclass
class SourceMap:
    """Where each field of one YAML document was written (1-based lines)."""

    path: Path
    root: yaml.Node | None

    def line(self, loc: Sequence[str | int]) -> int:
        """The line of the deepest node on ``loc`` that exists (the parent of a missing field).
        A nested mapping or list is located by its key's line, where the user wrote its name."""
        node = self.root
        line = node.start_mark.line + 1 if node is not None else 1
        for part in loc:
            key, child = _child(node, part)
            if child is None:
                break
            nested = isinstance(child, (yaml.MappingNode, yaml.SequenceNode))
            node, line = child, (key if key is not None and nested else child).start_mark.line + 1
        return line

    def error(self, loc: Sequence[str | int], message: str, *, hint: str | None = None) -> ProblemFileError:
        """A ``ProblemFileError`` pointing at ``loc`` in this file."""
        return ProblemFileError(str(self.path), message, line=self.line(loc), field=format_loc(loc), hint=hint)


def _child(node: yaml.Node | None, part: str | int) -> tuple[yaml.Node | None, yaml.Node | None]:
    """(key node, value node) of ``part`` under ``node``; the key is None for list items."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return None, node.value[part]
    return None, None


@dataclass
class LoadedProblem:
    """A validated problem, the file it came from and where each of its fields was written."""

    problem: Problem
    path: Path
    source: SourceMap

    @property
    def id(self) -> str:
        return self.problem.id


@dataclass
class LoadedSuite:
    suite: Suite
    path: Path
    source: SourceMap


def _duplicate_keys(node: yaml.Node | None, loc: tuple[str | int, ...] = ()) -> tuple[tuple, yaml.Node] | None:
    """PyYAML keeps the last of two equal keys silently; a repeated key is nearly always a typo."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    return (*loc, key.value), key
                seen.add(key.value)
                found = _duplicate_keys(value, (*loc, key.value))
                if found:
                    return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _duplicate_keys(item, (*loc, i))
            if found:
                return found
    return None


def read_yaml(path: Path) -> tuple[Any, SourceMap]:
    """Parse one YAML file into plain data plus its source map; syntax errors name the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemFileError(str(path), f"cannot be read: {e}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(p for p in (e.context, e.problem) if p)
        raise ProblemFileError(str(path), f"not valid YAML: {what}", line=line,
                               hint="check indentation and quoting on that line") from None
    except yaml.YAMLError as e:
        raise ProblemFileError(str(path), f"not valid YAML: {e}") from None
    source = SourceMap(path, root)
    dup = _duplicate_keys(root)
    if dup:
        loc, key = dup
        raise ProblemFileError(str(path), "this key is written twice in the same mapping",
                               line=key.start_mark.line + 1, field=format_loc(loc),
                               hint="keep one of the two (YAML would silently drop the first)")
    return data, source


def validate_model(model: type[M], data: Any, source: SourceMap) -> M:
    """Validate ``data`` as ``model``; the first error names file, line and field."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ProblemFileError(str(source.path), f"the file is {kind}; expected a mapping of fields "
                               f"({', '.join(list(model.model_fields)[:6])}, ...)", line=source.line(()))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        first = errors[0]
        loc = tuple(first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            known = _fields_at(model, loc[:-1])
            msg = "unknown field" + (f" (known here: {', '.join(known)})" if known else "")
        elif first["type"] == "missing":
            msg = "required field is missing"
        more = f" (+{len(errors) - 1} more error{'s' if len(errors) > 2 else ''} in this file)" if len(errors) > 1 else ""
        raise source.error(loc, msg + more) from None


def _fields_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """Names of the fields a nested model accepts at ``loc`` (for 'unknown field' hints)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            return []
        ann = info.annotation
        args = getattr(ann, "__args__", ()) or (ann,)
        current = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def load_problem_file(path: Path) -> LoadedProblem:
    """Load and validate one problem file (schema only; registries are checked by the conductor)."""
    data, source = read_yaml(path)
    problem = validate_model(Problem, data, source)
    if problem.id != path.stem:
        raise source.error(("id",), f"the id {problem.id!r} must equal the file name ({path.stem!r})",
                           hint=f"rename the file to {problem.id}.yaml or set id: {path.stem}")
    return LoadedProblem(problem, path, source)


def load_suite_file(path: Path) -> LoadedSuite:
    data, source = read_yaml(path)
    suite = validate_model(Suite, data, source)
    if suite.name != path.stem:
        raise source.error(("name",), f"the name {suite.name!r} must equal the file name ({path.stem!r})")
    return LoadedSuite(suite, path, source)


def problem_dirs(extra: Iterable[Path] = (), *, include_repo: bool = True) -> list[Path]:
    """The repository's ``problems/`` (when present) followed by the user's extra folders."""
    dirs = [REPO_PROBLEMS_DIR] if include_repo and REPO_PROBLEMS_DIR.is_dir() else []
    for d in extra:
        d = Path(d)
        if not d.is_dir():
            raise ProblemFileError(str(d), "--problems-dir is not a folder")
        if d.resolve() not in [x.resolve() for x in dirs]:
            dirs.append(d)
    return dirs


def _yaml_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


@dataclass
class Catalog:
    """Every problem and suite found in the problem folders, by id/name."""

    problems: dict[str, LoadedProblem] = field(default_factory=dict)
    suites: dict[str, LoadedSuite] = field(default_factory=dict)

    def problem(self, problem_id: str) -> LoadedProblem:
        try:
            return self.problems[problem_id]
        except KeyError:
            raise UnknownNameError("problem", problem_id, list(self.problems)) from None

    def suite(self, name: str) -> LoadedSuite:
        try:
            return self.suites[name]
        except KeyError:
            raise UnknownNameError("suite", name, list(self.suites)) from None

    def select(self, *, tags: Sequence[str] = (), difficulty: Sequence[str] = (), app: Sequence[str] = (),
               split: Sequence[str] = ()) -> list[LoadedProblem]:
        """Problems matching every given filter (a filter with several values matches any of them)."""
        return [lp for _, lp in sorted(self.problems.items())
                if matches(lp.problem, tags=tags, difficulty=difficulty, app=app, split=split)]

    def suite_problems(self, name: str) -> list[LoadedProblem]:
        """A suite's problems: its explicit ids, then those its query selects."""
        ls = self.suite(name)
        chosen: list[LoadedProblem] = []
        for i, pid in enumerate(ls.suite.problems):
            if pid not in self.problems:
                raise ls.source.error(("problems", i), f"unknown problem id {pid!r}")
            chosen.append(self.problems[pid])
        if ls.suite.query:
            q = ls.suite.query
            unknown = set(q) - {"tags", "difficulty", "app", "split"}
            if unknown:
                raise ls.source.error(("query", sorted(unknown)[0]),
                                      "unknown query key (use tags, difficulty, app, split)")
            as_list = {k: [v] if isinstance(v, str) else list(v) for k, v in q.items()}
            chosen += [lp for lp in self.select(**as_list) if lp not in chosen]
        return chosen


def matches(problem: Problem, *, tags: Sequence[str] = (), difficulty: Sequence[str] = (),
            app: Sequence[str] = (), split: Sequence[str] = ()) -> bool:
    """Whether ``problem`` passes the filters; ``tags`` must all be present, other lists match any."""
    if tags and not set(tags) <= set(problem.tags.all()):
        return False
    if difficulty and problem.difficulty.value not in difficulty:
        return False
    if app and problem.app.name not in app:
        return False
    return not split or problem.split.value in split


def load_catalog(extra_dirs: Iterable[Path] = (), *, include_repo: bool = True) -> Catalog:
    """Load every problem and suite; the first bad file raises ``ProblemFileError``."""
    catalog = Catalog()
    for folder in problem_dirs(extra_dirs, include_repo=include_repo):
        for path in _yaml_files(folder):
            lp = load_problem_file(path)
            if lp.id in catalog.problems:
                raise lp.source.error(("id",), f"problem id {lp.id!r} is also defined in "
                                      f"{catalog.problems[lp.id].path}", hint="problem ids must be unique")
            catalog.problems[lp.id] = lp
        suites = folder / "suites"
        if suites.is_dir():
            for path in _yaml_files(suites):
                ls = load_suite_file(path)
                catalog.suites.setdefault(ls.suite.name, ls)
    return catalog


def load_problem_arg(arg: str, extra_dirs: Iterable[Path] = ()) -> LoadedProblem:
    """A problem given on the command line: an id from the catalog, or a path to a YAML file."""
    p = Path(arg)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise ProblemFileError(arg, "no such file")
        return load_problem_file(p)
    return load_problem_file(find_problem(arg, extra_dirs))


def find_problem(problem_id: str, extra_dirs: Iterable[Path] = ()) -> Path:
    """The file of a problem id (ids equal file names, so other files need not parse)."""
    dirs = problem_dirs(extra_dirs)
    for folder in reversed(dirs):  # the user's folders first
        for suffix in (".yaml", ".yml"):
            if (folder / f"{problem_id}{suffix}").is_file():
                return folder / f"{problem_id}{suffix}"
    raise UnknownNameError("problem", problem_id, [p.stem for d in dirs for p in _yaml_files(d)])
