"""Link modes, one module each, found by name: ``nestlab.registry.LINK_MODES.get("vlan")``.

A mode module defines a :class:`~nestlab.links.base.LinkMode` and registers it; every module
in this package is imported here, so a new mode is a new file (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..plan.objects import AttachObj, LinkObj
from ..registry import LINK_MODES, Registry
from .base import LinkMode, Stage

Registry.load(__name__, __path__)


def by_stage(objs: Sequence[LinkObj | AttachObj]) -> list[tuple[LinkMode, list[LinkObj | AttachObj]]]:
    """``objs`` (links or attachments) grouped by mode, in deploy order (stage, then name)."""
    groups: dict[str, list[LinkObj | AttachObj]] = {}
    for obj in objs:
        groups.setdefault(obj.mode, []).append(obj)
    return [(LINK_MODES.get(m), groups[m]) for m in LINK_MODES.names() if m in groups]


__all__ = ["LinkMode", "Stage", "by_stage"]
