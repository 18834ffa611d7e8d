"""Where a lab runs, one module each, found by the word a lab's record holds: ``nestlab.registry.SITES``.

A site module defines a :class:`~nestlab.sites.base.Site` and registers it; every module in this
package is imported here, so a new place to run labs is a new file (docs/architecture.md).
"""

from __future__ import annotations

from ..registry import Registry
from .base import Site

Registry.load(__name__, __path__)

__all__ = ["Site"]
