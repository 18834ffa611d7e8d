"""The engine's entry for what this machine is: :func:`machine` reads it (``userns.machine()``) for every command
of this machine, and :func:`handed_out` hands a blueprint out to be planned with it and its management network's
leases, read here once, so planning reads no file (a deploy, a dry run and a check on this machine: engine/deploy.py).

Apart from engine/deploy.py, so that a command on a running lab (``inspect``, ``exec``) loads no applier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.kernel import mgmtleases, userns

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.machine import Machine


def machine() -> Machine:
    """What this machine lets nestlab do (rootless mode's limits), read once per process."""
    return userns.machine()


def handed_out(blueprint: Blueprint) -> Blueprint:
    """``blueprint`` on this machine (:func:`machine`), against its management network's leases (unless it is
    already planned)."""
    here, leases = machine(), blueprint.leases
    if blueprint.planned is None and leases is None and blueprint.network is not None:
        leases = mgmtleases.snapshot(blueprint.network)
    return blueprint if here == blueprint.machine and leases is blueprint.leases else blueprint.handed(here, leases)
