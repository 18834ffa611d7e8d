"""Ownership markers: every object nestlab creates is named after nestlab and its lab.

* network namespace ``/run/netns/nestlab.LAB.NODE`` (listed by ``ip netns``)
* UTS namespace pinned at ``/run/nestlab/LAB/uts/NODE``
* lab state ``/run/nestlab/LAB/state.json``
* interface alias ``nestlab:LAB`` on every interface (all live inside the lab's namespaces)

Lab and node names cannot contain ``.``, so a namespace name always tells its lab.
"""

from __future__ import annotations

import os

from .backends.namespaces import NETNS_DIR

STATE_ROOT = "/run/nestlab"
NETNS_PREFIX = "nestlab."


def netns_name(lab: str, node: str) -> str:
    return f"{NETNS_PREFIX}{lab}.{node}"


def netns_path(lab: str, node: str) -> str:
    return os.path.join(NETNS_DIR, netns_name(lab, node))


def lab_dir(lab: str) -> str:
    return os.path.join(STATE_ROOT, lab)


def uts_dir(lab: str) -> str:
    return os.path.join(lab_dir(lab), "uts")


def uts_path(lab: str, node: str) -> str:
    return os.path.join(uts_dir(lab), node)


def alias(lab: str) -> str:
    return f"nestlab:{lab}"


def lab_of_netns(name: str) -> str | None:
    """The lab a namespace name belongs to, or None if it is not nestlab's."""
    if not name.startswith(NETNS_PREFIX):
        return None
    lab, sep, _node = name[len(NETNS_PREFIX) :].partition(".")
    return lab if sep and lab else None
