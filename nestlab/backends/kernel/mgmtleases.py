"""A management network's leases on this machine: ``/run/nestlab-mgmt/NETWORK.json`` says which lab holds which address.

Labs naming one network (``mgmt: {network: clab}``, containerlab's default) share its bridge and subnet,
so an address is leased, not planned alone.  The file holds the bridge the network's first lab made,
its subnet and each lab's addresses: ``{"bridge": ..., "subnet": ..., "labs": {LAB: {NODE: IPV4}}}``.
Whoever starts planning a lab reads it once (:func:`snapshot`) and hands planning the value
(``plan/mgmt.py``: a lab keeps what it holds, new nodes take the first free addresses); deploying writes
the lab's leases under the network's lock (:func:`locked`, :func:`lease`) and refuses an address another
lab took meanwhile; removing a lab gives them back (:func:`release`, :func:`networks_of`).  Beside
``mgmtnet.py``, which makes the network's bridge and rules under the same lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from ... import names
from ...errors import LabError
from ...plan.mgmt import Leases
from . import files, locks


def _file(network: str) -> dict[str, Any]:
    try:
        with open(names.mgmt_leases(network)) as fh:
            found = json.load(fh)
    except (FileNotFoundError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _labs(found: dict[str, Any]) -> dict[str, dict[str, str]]:
    labs = found.get("labs")
    return labs if isinstance(labs, dict) else {}


def read(network: str) -> dict[str, dict[str, str]]:
    """lab -> node -> its IPv4 address, as leased now."""
    return _labs(_file(network))


def snapshot(network: str) -> Leases:
    """The network's leases as they are now (one read), for planning: the subnet its labs use and their addresses."""
    found = _file(network)
    return Leases(network, str(found.get("subnet") or ""), _labs(found))


def bridge_of(network: str, default: str) -> str:
    """The bridge the network's first lab made (its name is the file's, not every lab's to choose), else ``default``."""
    return str(_file(network).get("bridge") or default)


@contextlib.contextmanager
def locked(network: str) -> Iterator[None]:
    files.make_dirs(names.MGMT_ROOT)
    with locks.file_held(names.mgmt_leases(network) + ".lock"):  # 0600: no other user can hold it
        yield


def _write(network: str, labs: dict[str, dict[str, str]], bridge: str, subnet: str) -> None:
    path = names.mgmt_leases(network)
    files.write(path, json.dumps({"bridge": bridge, "subnet": subnet, "labs": labs}), 0o644, sync=False)


def lease(network: str, bridge: str, lab: str, held: dict[str, str], subnet: str) -> None:
    """Record the lab's addresses on the network whose bridge is ``bridge`` (:func:`bridge_of`; the network
    locked by the caller) before anything is made, so a cleanup finds the network; refused if another lab
    holds one of them."""
    labs = read(network)
    owners = {a: other for other, addresses in labs.items() if other != lab for a in addresses.values()}
    clash = sorted((node, a, owners[a]) for node, a in held.items() if a in owners)
    if clash:
        node, address, other = clash[0]
        raise LabError(
            f"management address {address} of node {node} is held by lab {other} on network {network} "
            "(both deployed at once); deploy again, or give the node another mgmt-ipv4"
        )
    labs[lab] = {**labs.get(lab, {}), **held}
    _write(network, labs, bridge, str(_file(network).get("subnet") or subnet))


def release(network: str, lab: str) -> bool:
    """Drop the lab's leases (network locked by the caller); True when no lab holds an address any more."""
    labs = read(network)
    labs.pop(lab, None)
    if labs:
        _write(network, labs, bridge_of(network, names.mgmt_bridge(network)), str(_file(network).get("subnet") or ""))
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(names.mgmt_leases(network))
    return True


def networks_of(lab: str) -> list[str]:
    """The management networks ``lab`` holds addresses on (for cleanup, which has no topology)."""
    if not os.path.isdir(names.MGMT_ROOT):
        return []
    return sorted(
        entry.name.removesuffix(".json")
        for entry in os.scandir(names.MGMT_ROOT)
        if entry.name.endswith(".json") and lab in read(entry.name.removesuffix(".json"))
    )
