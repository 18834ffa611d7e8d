"""The plug-in registries (node kinds, link modes, node runtimes, sites), found by name.

Each plug-in module registers itself when its package is imported; a registry imports its package
by name the first time it is asked, the way entry points are found.  So the layers below the plug-ins
(model, plan) look plug-ins up here without importing them (docs/architecture.md).

The registries hold ``Any`` for the type checker: naming the plug-in base classes here, even for
types only, would make this leaf and the plug-ins import each other.  Each plug-in package types
its own hooks (its ``base.py``), and the layers above reach a typed kind through ``nestlab.kinds.of``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """``name -> plug-in``, filled by the modules of ``package``; ``order`` sorts :meth:`names`."""

    def __init__(self, what: str, package: str, order: Callable[[T], Any] | None = None):
        self.what = what
        self.package = package
        self.order = order
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._loaded = False

    def register(self, item: T, aliases: Iterable[str] = ()) -> T:
        """Add ``item`` (and other words users may write for it)."""
        if item.name in self._items or item.name in self._aliases:
            raise ValueError(f"{self.what} {item.name} registered twice")
        self._items[item.name] = item
        for alias in aliases:
            self._aliases[alias] = item.name
        return item

    def _all(self) -> dict[str, T]:
        if not self._loaded:
            self._loaded = True
            importlib.import_module(self.package)
        return self._items

    def get(self, name: str) -> T:
        items = self._all()
        return items[self._aliases.get(name, name)]

    def canonical(self, name: str) -> str:
        """The registered name for ``name`` or one of its aliases."""
        self._all()
        return self._aliases.get(name, name)

    def words(self) -> list[str]:
        """Every word a file may use: names and aliases."""
        return sorted([*self._all(), *self._aliases])

    def names(self) -> list[str]:
        items = self._all()
        if self.order is None:
            return sorted(items)
        order = self.order
        return sorted(items, key=lambda name: order(items[name]))

    def values(self) -> list[T]:
        return [self._all()[name] for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.canonical(name) in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    @staticmethod
    def load(package: str, path: Iterable[str]) -> None:
        """Import every module of ``package`` (but ``base``), so each registers itself."""
        for info in pkgutil.iter_modules(path):
            if info.name != "base":
                importlib.import_module(f"{package}.{info.name}")


KINDS: Registry[Any] = Registry("node kind", "nestlab.kinds", order=lambda kind: (kind.order, kind.name))
LINK_MODES: Registry[Any] = Registry("link mode", "nestlab.links", order=lambda mode: (mode.stage, mode.name))
RUNTIMES: Registry[Any] = Registry("runtime", "nestlab.runtimes")
SITES: Registry[Any] = Registry("site", "nestlab.sites", order=lambda site: (site.rank, site.name))
