"""Ownership markers: every object nestlab creates is named after nestlab and its lab.

* network namespace ``/run/netns/nestlab.LAB.NODE`` (listed by ``ip netns``)
* UTS namespace pinned at ``/run/nestlab/LAB/uts/NODE``
* a node's own filesystem view (mount namespace) pinned at ``/run/nestlab/LAB/mnt/NODE``, its
  files (e.g. ``etc/frr``) under ``/run/nestlab/LAB/nodes/NODE/``
* lab state ``/run/nestlab/LAB/state.json``
* cgroup ``nestlab.LAB/NODE[/COMPONENT]`` under each hierarchy (v1) or ``/sys/fs/cgroup`` (v2)
* runc state under ``/run/nestlab/LAB/runc``, Docker containers named ``nestlab.LAB.NODE``
* interface alias ``nestlab:LAB`` on every interface (all live inside the lab's namespaces)

Lab and node names cannot contain ``.``, so a namespace name always tells its lab.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

IFNAMSIZ = 15  # the longest interface name the kernel takes (its IFNAMSIZ, 16, less the NUL)
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_plain(name: str) -> bool:
    """Letters, digits, '.', '-', '_', the first a letter or digit: what an interface name, an image's name and
    a container's name prefix are made of (a shell needs no quotes for it)."""
    return _PLAIN.fullmatch(name) is not None


def is_ifname(name: str) -> bool:
    """An interface name the kernel takes and a shell needs no quotes for: 1-15 of :func:`is_plain`'s characters."""
    return len(name) <= IFNAMSIZ and is_plain(name)


def python_module(module: str) -> list[str]:
    """The command line of a helper nestlab starts as ``python -m MODULE``: ``-P`` puts no working directory
    first on sys.path, so a ``nestlab/`` in the caller's (perhaps another user's) folder never runs as root."""
    return [sys.executable, "-P", "-m", module]


NETNS_DIR = "/run/netns"  # where ip netns (and nestlab) pin network namespaces

STATE_ROOT = "/run/nestlab"
LOCK_ROOT = "/run/nestlab-lock"  # the locks nestlab waits on: root's own folder (0700), files 0600 (docs/security.md)
HIDDEN = ("/run/netns", "/run/nestlab")  # mounts under /run a node's own view drops before covering /run
IMAGE_ROOT = "/var/lib/nestlab/images"  # where `nestlab image build NAME` puts images
_TARBALL = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst")


def built(name: str) -> Path:
    """Where ``nestlab image build NAME`` puts an image."""
    return Path(IMAGE_ROOT) / name


def looks_like_path(value: str) -> bool:
    """Whether an ``image:`` value is a path (a rootfs folder, a tarball, an OCI layout) rather than a name."""
    return value.startswith(("/", "./", "../", "~")) or value.endswith(_TARBALL)


NETNS_PREFIX = "nestlab."


def _file(node: str) -> str:
    """A node name as one path element: component ``n1/gnab`` becomes ``n1.gnab``."""
    return node.replace("/", ".")


def netns_name(lab: str, node: str) -> str:
    return f"{NETNS_PREFIX}{lab}.{_file(node)}"


def netns_path(lab: str, node: str) -> str:
    return os.path.join(NETNS_DIR, netns_name(lab, node))


def lab_dir(lab: str) -> str:
    return os.path.join(STATE_ROOT, lab)


def uts_dir(lab: str) -> str:
    return os.path.join(lab_dir(lab), "uts")


def uts_path(lab: str, node: str) -> str:
    return os.path.join(uts_dir(lab), _file(node))


def view_dir(lab: str) -> str:
    return os.path.join(lab_dir(lab), "mnt")


def view_path(lab: str, node: str) -> str:
    """Where a node's mount namespace (its filesystem view) is pinned."""
    return os.path.join(view_dir(lab), _file(node))


def node_dir(lab: str, node: str) -> str:
    """A node's own files, bound into its view (config folders of its daemons)."""
    return os.path.join(lab_dir(lab), "nodes", _file(node))


def init_pid_path(lab: str, node: str) -> str:
    """Where the PID of a container node's first process is kept (its namespaces are entered through it)."""
    return os.path.join(lab_dir(lab), "init", _file(node))


def cgroup_name(lab: str) -> str:
    """The lab's cgroup directory under every hierarchy; nodes and components are below it."""
    return f"nestlab.{lab}"


def alias(lab: str) -> str:
    return f"nestlab:{lab}"


def lab_of_netns(name: str) -> str | None:
    """The lab a namespace name belongs to, or None if it is not nestlab's."""
    if not name.startswith(NETNS_PREFIX):
        return None
    lab, sep, _node = name[len(NETNS_PREFIX) :].partition(".")
    return lab if sep and lab else None


MGMT_ROOT = "/run/nestlab-mgmt"  # management networks, shared by the labs that name them (not a lab's folder)


def mgmt_leases(network: str) -> str:
    """Which lab holds which management address of ``network`` (and the lock beside it)."""
    return os.path.join(MGMT_ROOT, f"{network}.json")


def mgmt_bridge(network: str) -> str:
    """The default bridge of a management network: ``br-NETWORK`` cut to the kernel's 15 characters."""
    return f"br-{network}"[:IFNAMSIZ]


def long_name(prefix: str | None, lab: str, node: str) -> str:
    """containerlab's name of a node: ``clab-LAB-NODE``; ``prefix: P`` gives ``P-LAB-NODE``, ``prefix: ""``
    ``NODE`` and ``prefix: __lab-name`` ``LAB-NODE`` (a component ``n1/c`` is ``n1-c``)."""
    short = node.replace("/", "-")
    chosen = "clab" if prefix is None else prefix
    if chosen == "":
        return short
    if chosen == "__lab-name":
        return f"{lab}-{short}"
    return f"{chosen}-{lab}-{short}"


KEYS_ROOT = "/var/lib/nestlab/ssh"  # outside /run: a node's own filesystem view hides /run/nestlab


def lab_keys(lab: str) -> str:
    """The lab's SSH host key, client key and sshd configuration (root's alone)."""
    return os.path.join(KEYS_ROOT, lab)


def clab_kind(kind: str) -> str:
    """containerlab's word for a node of this kind (an FRR node is containerlab's linux kind running FRR's image)."""
    return {"ovs": "ovs-bridge", "machine": "host", "frr": "linux"}.get(kind, kind)
