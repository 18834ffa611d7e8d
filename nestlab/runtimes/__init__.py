"""Node runtimes, one module each, found by name: ``nestlab.runtimes.get("runc")``.

A runtime module defines a :class:`~nestlab.runtimes.base.Runtime` and registers it; every module
in this package is imported here, so a new runtime is a new file (docs/architecture.md).
"""

from __future__ import annotations

from .base import REGISTRY, Runtime

REGISTRY.load(__name__, __path__)


def get(name: str) -> Runtime:
    return REGISTRY[name]


def selectable() -> list[str]:
    """The words ``runtime:`` takes."""
    return sorted(name for name, rt in REGISTRY.items() if rt.selectable)


def resolve(runtime: str | None, image: str | None, nested_component: bool) -> str:
    """A node's runtime: the one it names; else runc for an image; else isolated for a nested component; else namespace."""
    if runtime:
        return runtime
    if image:
        return "runc"
    return "isolated" if nested_component else "namespace"


__all__ = ["Runtime", "get", "resolve", "selectable"]
