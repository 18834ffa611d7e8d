"""Interfaces made outside a lab's plan, for containerlab's ``tools``: a veth pair between two namespaces (a
node's or this machine's), and a VXLAN tunnel joined to one of this machine's interfaces by tc redirects.
Each carries its lab's marker (``nestlab:LAB``), so the lab's cleanup removes it with the rest."""

from __future__ import annotations

import os
import subprocess

from ... import names
from ...errors import LabError
from . import namespaces, rtdump
from .netlink import Netlink, NetlinkError, del_link, new_veth, set_up, sublink, vxlan_data

End = tuple[str | None, str]  # (node's network namespace path, or None for this machine; interface)


def _open(path: str | None) -> tuple[int, Netlink]:
    return namespaces.open_netlink(path or "/proc/self/ns/net")


def create(a: End, b: End, lab: str, mtu: int) -> None:
    """A veth pair, ``a``'s end made in its namespace, ``b``'s born in its own; both up."""
    fd_a, nl_a = _open(a[0])
    fd_b, nl_b = _open(b[0])
    try:
        try:
            marker = names.alias(lab)  # set by a change: the kernel keeps no alias given at creation
            nl_a.run(new_veth(a[1], b[1], fd_b, alias=marker, mtu=mtu), set_up(a[1], marker))
            nl_b.run(set_up(b[1], marker))
        except NetlinkError as exc:
            raise LabError(f"veth {a[1]} <--> {b[1]}: the kernel refused: {exc.strerror}") from None
    finally:
        for fd, nl in ((fd_a, nl_a), (fd_b, nl_b)):
            nl.close()
            os.close(fd)


def vxlan_stitch(link: str, remote: str, vni: int, port: int, src_port: int, dev: str | None, mtu: int) -> str:
    """A VXLAN interface ``vx-LINK`` to ``remote`` and tc redirects between it and ``link`` (this machine's
    interface, which must carry a lab's marker); returns its name."""
    found = {i.name: i for i in rtdump.of_namespace("/proc/self/ns/net", counters=False)}
    if link not in found:
        raise LabError(f"this machine has no interface {link}")
    owner = found[link].alias
    if not owner.startswith(names.alias("")):
        raise LabError(f"{link} is not an interface of a nestlab lab (it carries no lab's marker): nestlab changes only its own")
    if dev is not None and dev not in found:
        raise LabError(f"this machine has no interface {dev}")
    name = f"vx-{link}"[: names.IFNAMSIZ]
    data = vxlan_data(vni, remote, port, src_port=src_port, dev_index=found[dev].index if dev else 0)
    nl = Netlink()
    try:
        nl.run(sublink("vxlan", name, data, alias=owner, mtu=mtu or max(68, found[link].mtu - 50)), set_up(name, owner))
    except NetlinkError as exc:
        raise LabError(f"vxlan {name}: the kernel refused: {exc.strerror}") from None
    finally:
        nl.close()
    for src, dst in ((link, name), (name, link)):
        for args in (
            ["qdisc", "add", "dev", src, "ingress"],
            ["filter", "add", "dev", src, "parent", "ffff:", "protocol", "all", "u32", "match", "u8", "0", "0"]
            + ["action", "mirred", "egress", "redirect", "dev", dst],
        ):
            done = subprocess.run(["tc", *args], capture_output=True, text=True)
            if done.returncode:
                raise LabError(f"tc {' '.join(args)}: {done.stderr.strip()}")
    return name


def delete_vxlans(prefix: str) -> list[str]:
    """This machine's VXLAN interfaces named ``prefix``... that carry a lab's marker; returns their names."""
    gone = [
        i.name
        for i in rtdump.of_namespace("/proc/self/ns/net", counters=False)
        if i.kind == "vxlan" and i.name.startswith(prefix) and i.alias.startswith(names.alias(""))
    ]
    nl = Netlink()
    try:
        for name in gone:
            nl.run(del_link(name))
    finally:
        nl.close()
    return gone
