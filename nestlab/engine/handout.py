"""A blueprint handed out to be planned: with what this machine is and its management network's leases, each read
here once, so planning reads no file (``Lab.blueprint``, and a deploy, a dry run and a check on this machine).

Apart from engine/deploy.py, so that a command on a running lab (``inspect``, ``exec``) loads no applier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.kernel import mgmtleases, userns

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint


def handed_out(blueprint: Blueprint) -> Blueprint:
    """``blueprint`` on this machine (what it lets nestlab do: ``userns.machine()``), against its management
    network's leases (unless it is already planned)."""
    machine, leases = userns.machine(), blueprint.leases
    if blueprint.planned is None and leases is None and blueprint.network is not None:
        leases = mgmtleases.snapshot(blueprint.network)
    return blueprint if machine == blueprint.machine and leases is blueprint.leases else blueprint.handed(machine, leases)
