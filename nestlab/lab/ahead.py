"""A lab's namespaces made ahead, while its file loads: ``nestlab deploy`` starts this before it imports the
model and the planner, and a forked helper (backends/kernel/spares.py) makes what a glance at the file names."""

from __future__ import annotations

import os
from pathlib import Path

from .. import names
from ..backends.kernel import spares
from ..model.glance import Glance, glance


def start(topo: Path, reconfigure: bool) -> None:
    """Fork the helper for ``topo``'s namespaces (none for a lab already running, unless it is to be remade)."""
    spares.start(lambda: ahead_of(glance(topo), reconfigure))


def stop() -> None:
    """Free what was made ahead and not taken, and reap the helper."""
    spares.stop()


def ahead_of(glanced: Glance, reconfigure: bool) -> spares.Ahead:
    """What a deploy will make, from a glance at its file: nothing to reconcile a running lab."""
    if not glanced.name or (os.path.isdir(names.lab_dir(glanced.name)) and not reconfigure):
        return spares.Ahead("", ())
    return spares.Ahead(
        names.alias(glanced.name),
        glanced.nodes,
        glanced.extra,
        glanced.bridges,
        glanced.cables,
        tuple(glanced.bridge_sysctls.items()),
    )
