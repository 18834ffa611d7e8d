"""Node runtimes, one module each, found by name: ``nestlab.registry.RUNTIMES.get("runc")``.

A runtime module defines a :class:`~nestlab.runtimes.base.Runtime` and registers it; every module
in this package is imported here, so a new runtime is a new file (docs/architecture.md).
"""

from __future__ import annotations

from ..registry import Registry
from .base import Runtime

Registry.load(__name__, __path__)

__all__ = ["Runtime"]
