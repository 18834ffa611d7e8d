"""Link modes, one module each, found by name: ``nestlab.links.get("vlan")``.

A mode module defines a :class:`~nestlab.links.base.LinkMode` and registers it; every module
in this package is imported here, so a new mode is a new file (docs/architecture.md).
"""

from __future__ import annotations

from .base import REGISTRY, LinkMode, Stage

REGISTRY.load(__name__, __path__)


def get(name: str) -> LinkMode:
    return REGISTRY[name]


def names() -> list[str]:
    """Every mode word, in deploy order (by stage, then name)."""
    return sorted(REGISTRY, key=lambda name: (REGISTRY[name].stage, name))


def option_owners() -> dict[str, list[str]]:
    """Each mode-owned link key and the modes that take it."""
    owners: dict[str, list[str]] = {}
    for mode in REGISTRY.values():
        for key in mode.options:
            owners.setdefault(key, []).append(mode.name)
    return owners


def by_stage(objs) -> list[tuple[LinkMode, list]]:
    """``objs`` (links or attachments) grouped by mode, in deploy order (stage, then registration)."""
    groups: dict[str, list] = {}
    for obj in objs:
        groups.setdefault(obj.mode, []).append(obj)
    return [(REGISTRY[m], groups[m]) for m in names() if m in groups]


__all__ = ["LinkMode", "Stage", "by_stage", "get", "names", "option_owners"]
