"""A registry of plug-ins by name, filled by the modules of a package as they are imported."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable


class Registry(dict):
    """``name -> item``; each module of a package calls :meth:`register` for its own item."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, item):
        if item.name in self:
            raise ValueError(f"{self.what} {item.name} registered twice")
        self[item.name] = item
        return item

    @staticmethod
    def load(package: str, path: Iterable[str]) -> None:
        """Import every module of ``package`` (but ``base``), so each registers itself."""
        for info in pkgutil.iter_modules(path):
            if info.name != "base":
                importlib.import_module(f"{package}.{info.name}")
