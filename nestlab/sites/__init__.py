"""Where a lab runs, one module each, found by the word a lab's record holds: ``nestlab.registry.SITES``.

A site module defines a class that implements :class:`~nestlab.sites.seam.Site` (this machine's directly, the
SSH servers' and Kubernetes' on :class:`~nestlab.sites.elsewhere.Elsewhere`), says which labs a new deploy sends
it (``claims(blueprint, options)``, asked in the order of its ``rank``) and registers it; every module in this
package is imported here, so a new place to run labs is a new file (docs/architecture.md).  :func:`of` finds a
running lab's site, :func:`chosen` the site a new deploy goes to, :func:`remove` removes a lab by name wherever
it runs.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..engine.where import LOCAL, DamagedRecord, read
from ..errors import LabError
from ..registry import SITES, Registry

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from . import seam

Registry.load(__name__, __path__)

__all__ = ["chosen", "of", "remove"]


def of(lab: str) -> seam.Site:
    """The site a lab runs on, as its record says (this machine when there is none)."""
    found = read(lab)
    word, data = found or (LOCAL, {})
    site: seam.Site = SITES.get(word)(lab, data)
    return site


def chosen(blueprint: Blueprint, options: object = None) -> seam.Site:
    """The site a deploy of ``blueprint`` goes to, made with ``options`` (a command's choice of place and its
    settings: a Kubernetes ``Target``): the first site, by rank, that claims it (``servers:`` on SSH servers; this
    machine takes any lab).  Without options, where its record says the lab runs, when that is another kind of
    place (a lab a ``k8s deploy`` made is not made again here)."""
    site = next(found for found in SITES.values() if found.claims(blueprint, options))
    recorded = read(blueprint.name)
    if options is None and recorded is not None and recorded[0] != site.name:
        return of(blueprint.name)
    made: seam.Site = site(blueprint.name, {}, options)
    return made


def remove(lab: str, folder_too: bool = False) -> int:
    """Remove ``lab`` wherever it runs (its site's :meth:`~nestlab.sites.seam.Site.remove`): every server's or pod's
    share, then what is marked as its on this machine; returns how many namespaces went here.  With a
    damaged record, what is on this machine still goes, and the damage is the error."""
    from ..engine.cleanup import remove_here

    try:
        site = of(lab)
    except DamagedRecord as exc:
        damaged = exc
    else:
        return site.remove(folder_too)
    with contextlib.suppress(LabError):
        remove_here(lab, folder_too)
    raise damaged
