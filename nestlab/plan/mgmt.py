"""The management network's addresses: which node of which lab holds which address of a network.

Labs naming one network (``mgmt: {network: clab}``, containerlab's default) share its bridge and
subnet, so an address is leased, not planned alone: ``/run/nestlab-mgmt/NETWORK.json`` says which lab
holds which address.  Planning reads it (a lab keeps what it holds, new nodes take the first free
addresses of the range, fixed ``mgmt-ipv4:`` addresses are the node's); deploying writes the lab's
leases under the network's lock and refuses an address another lab took meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .. import names
from ..errors import LabError
from .objects import AttachObj, Plan


def interfaces(plan: Plan) -> dict[str, AttachObj]:
    """Each node's management interface (its eth0 with the management address), by node: the attachments
    of mode mgmt that are not a port (``host_interface``, containerlab's ``mgmt-net:IF``)."""
    return {a.end.node: a for a in plan.attachments.values() if a.mode == "mgmt" and not a.option("host_interface")}


@dataclass(frozen=True)
class Network:
    """A management network as a lab's file sets it, parsed."""

    name: str
    bridge: str
    ipv4: ipaddress.IPv4Network
    ipv6: ipaddress.IPv6Network
    gw4: ipaddress.IPv4Address
    gw6: ipaddress.IPv6Address
    range4: ipaddress.IPv4Network
    mtu: int
    external: bool

    @classmethod
    def of(cls, spec) -> Network:
        """From the topology's ``mgmt:`` (checked by the model)."""
        v4, v6 = ipaddress.IPv4Network(spec.ipv4_subnet), ipaddress.IPv6Network(spec.ipv6_subnet)
        return cls(
            spec.network,
            spec.bridge or names.mgmt_bridge(spec.network),
            v4,
            v6,
            ipaddress.IPv4Address(spec.ipv4_gw) if spec.ipv4_gw else v4.network_address + 1,
            ipaddress.IPv6Address(spec.ipv6_gw) if spec.ipv6_gw else v6.network_address + 1,
            ipaddress.IPv4Network(spec.ipv4_range) if spec.ipv4_range else v4,
            spec.mtu,
            spec.external_access,
        )

    def v6_for(self, v4: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
        """The IPv6 address that goes with ``v4``: the same host number (172.20.20.3 -> 3fff:172:20:20::3)."""
        return self.ipv6.network_address + (int(v4) - int(self.ipv4.network_address))


def _file(network: str) -> dict:
    try:
        with open(names.mgmt_leases(network)) as fh:
            found = json.load(fh)
    except (FileNotFoundError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def read(network: str) -> dict[str, dict[str, str]]:
    """lab -> node -> its IPv4 address, as leased now."""
    labs = _file(network).get("labs")
    return labs if isinstance(labs, dict) else {}


def in_use(network: str, lab: str) -> tuple[str, list[str]] | None:
    """The subnet a network has while other labs hold addresses on it, and those labs (None: free)."""
    found = _file(network)
    others = sorted(other for other in read(network) if other != lab)
    return (str(found.get("subnet") or ""), others) if others and found.get("subnet") else None


def bridge_of(network: str, default: str) -> str:
    """The bridge the network's first lab made (its name is the file's, not every lab's to choose), else ``default``."""
    return str(_file(network).get("bridge") or default)


def choose(net: Network, lab: str, nodes: list[str], fixed: dict[str, str]) -> dict[str, ipaddress.IPv4Address]:
    """Each node's IPv4 address: its fixed one, else what the lab holds, else the first free one of the range."""
    leases = read(net.name)
    others = {ipaddress.IPv4Address(a) for other, held in leases.items() if other != lab for a in held.values()}
    taken = others | {ipaddress.IPv4Address(a) for a in fixed.values()} | {net.gw4}
    mine = leases.get(lab, {})
    out: dict[str, ipaddress.IPv4Address] = {}
    for node in nodes:
        if node in fixed:
            out[node] = ipaddress.IPv4Address(fixed[node])
        elif node in mine and ipaddress.IPv4Address(mine[node]) not in taken:
            out[node] = ipaddress.IPv4Address(mine[node])
            taken.add(out[node])
    free = (a for a in net.range4.hosts() if a not in taken and a in net.ipv4)
    for node in nodes:
        if node not in out:
            address = next(free, None)
            if address is None:
                raise LabError(f"management network {net.name} ({net.ipv4}) has no free address left for node {node}")
            out[node] = address
    return out


@contextlib.contextmanager
def locked(network: str) -> Iterator[None]:
    os.makedirs(names.MGMT_ROOT, exist_ok=True)
    with open(names.mgmt_leases(network) + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _write(network: str, labs: dict[str, dict[str, str]], bridge: str, subnet: str) -> None:
    path = names.mgmt_leases(network)
    with open(path + ".tmp", "w") as fh:
        json.dump({"bridge": bridge, "subnet": subnet, "labs": labs}, fh)
    os.replace(path + ".tmp", path)


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
