"""One typed registry per kind of plug-in (injectors, oracles, agents), filled by decorators.

Every kind registers the same way: a class decorator named after the kind, made by
:meth:`Registry.plugin` (``@injector("pod_kill")``, ``@mitigation_oracle("slo")``,
``@diagnosis_oracle("checklist_judge")``, ``@agent("react")``). It sets the class's ``name`` and a
one-line ``summary`` (the first line of its docstring) and registers it.

Built-in plug-ins live in the top-level ``injectors/`` and ``oracles/`` packages; third-party
packages add theirs through the entry-point groups ``sregym.injectors`` and ``sregym.oracles``
(an entry point names a module or package; importing it runs its decorators).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Generic, TypeVar

from sregym.core.errors import UnknownNameError, UserInputError

T = TypeVar("T")
C = TypeVar("C", bound=type)


class Registry(Generic[T]):
    """Name -> plug-in. ``kind`` appears in error messages ("unknown injector 'x'")."""

    def __init__(self, kind: str, entry_point_group: str | None = None, builtin_package: str | None = None):
        self.kind = kind
        self.group = entry_point_group
        self.builtin_package = builtin_package
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        # name -> (built-in module, the user's module) for each built-in a user's plug-in replaced
        self.replaced: dict[str, tuple[str, str]] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@INJECTORS.register("pod_kill")``."""

        def decorate(obj: T) -> T:
            origin = getattr(obj, "__module__", "?")
            if name in self._items and self._origins[name] != origin:
                first = self._origins[name]
                if is_user_plugin(first) == is_user_plugin(origin):
                    raise UserInputError(f"{self.kind} {name!r} is registered twice: by {first} and by {origin}",
                                         hint=f"rename one of the two {self.kind}s")
                # A user's plug-in (--plugins) replaces the built-in of its name, whichever loads
                # first: working from a copy of injectors/ with one primitive edited is how a
                # researcher changes one. An unchanged copy is the same code: nothing is replaced.
                user, builtin = (origin, first) if is_user_plugin(origin) else (first, origin)
                if not same_source(user, builtin):
                    self.replaced[name] = (builtin, user)
                if user == first:
                    return obj  # the built-in loads after the user's plug-in: the plug-in stays
            self._items[name] = obj
            self._origins[name] = origin
            return obj

        return decorate

    def plugin(self, name: str) -> Callable[[C], C]:
        """Class decorator: name the class ``name`` (and ``summary`` from its docstring's first line
        unless it sets one), then register it. Each kind's decorator (``injector`` ...) is this."""

        def decorate(cls: C) -> C:
            cls.name = name
            if not getattr(cls, "summary", "") and cls.__doc__:
                cls.summary = cls.__doc__.strip().splitlines()[0]
            return self.register(name)(cls)

        return decorate

    def load(self) -> None:
        """Import built-ins (every module of the builtin package) and entry points, once."""
        if self._loaded:
            return
        # Suite workers look names up from several threads: the first loads, the others wait.
        with self._lock:
            if self._loaded:
                return
            if self.builtin_package:
                import_package_modules(self.builtin_package)
            if self.group:
                for ep in entry_points(group=self.group):
                    if ep.value == self.builtin_package:
                        continue
                    import_package_modules(ep.value)
            self._loaded = True

    def get(self, name: str) -> T:
        self.load()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._items)) from None

    def names(self) -> list[str]:
        self.load()
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        self.load()
        yield from sorted(self._items.items())

    def __contains__(self, name: str) -> bool:
        self.load()
        return name in self._items


def import_package_modules(package: str) -> None:
    """Import ``package`` and, if it is a package, each of its modules (which register themselves)."""
    mod = importlib.import_module(package)
    for info in pkgutil.iter_modules(getattr(mod, "__path__", []), prefix=f"{package}."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(info.name)


PLUGIN_MODULE_PREFIX = "sregym_plugin_"


def is_user_plugin(module: str) -> bool:
    """Whether ``module`` is a file from a user's ``--plugins`` folder (see ``import_path``)."""
    return module.startswith(PLUGIN_MODULE_PREFIX)


def same_source(module_a: str, module_b: str) -> bool:
    """Whether two modules were imported from files with the same content."""
    files = [getattr(sys.modules.get(m), "__file__", None) for m in (module_a, module_b)]
    try:
        return None not in files and Path(files[0]).read_bytes() == Path(files[1]).read_bytes()
    except OSError:
        return False


def import_path(path: Path) -> None:
    """Import every ``*.py`` under a folder given by the user (``--plugins DIR``)."""
    for file in sorted(Path(path).glob("*.py")):
        if file.name.startswith("_"):
            continue
        name = f"{PLUGIN_MODULE_PREFIX}{file.stem}"
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise UserInputError(f"{file}: cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
