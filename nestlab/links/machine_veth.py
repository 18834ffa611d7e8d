"""machine-veth (once ``host``): a veth from a node to the machine it runs on, that end named ``host_interface``
(containerlab's ``host:IF``).

Without ``hosts:`` the host is this machine: the end sits in the root namespace, carries the
lab's marker, and goes with the node.  Nothing is bridged or routed on the host's side.  A name
longer than the kernel's 15 characters is, as containerlab does it, the interface's second name
(``ip link show LONG-NAME`` finds it); its first is the name's start and a digest.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ..names import IFNAMSIZ, is_plain
from ..plan.objects import AttachObj, Options, shapes
from .base import LinkMode, Stage, into_switches, register, up_and_address

ALTNAME_MAX = 127  # a longer name than the kernel's IFNAMSIZ is the interface's altname, up to this

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import EndObj, LinkObj
    from ..plugins import Applying, Checking, Planning


class MachineVeth(LinkMode):
    name = "machine-veth"
    aliases = ("host",)  # its word until the kinds' layer (containerlab says host:IF)
    summary = "a veth from the node to the machine it runs on (this one without hosts:), that end named host_interface"
    ends = 1
    real_host = True
    takes_macs = True
    switch_port = True
    stage = Stage.ATTACH
    options = {
        "host_interface": (
            str | None,
            {"default": None, "description": "machine-veth: the name of the veth's end on the machine"},
        )
    }

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        if not link.host_interface:
            return [
                ctx.problem(
                    path + ("mode",),
                    "mode: machine-veth needs host_interface: NAME, the veth's end on the machine (containerlab: host:NAME)",
                )
            ]
        if not (is_plain(link.host_interface) and len(link.host_interface) <= ALTNAME_MAX):
            return [
                ctx.problem(
                    path + ("host_interface",),
                    f"'{link.host_interface}' is not an interface name (1-127 letters, digits, '.', '-', '_')",
                )
            ]
        if link.parent:
            return [ctx.problem(path + ("parent",), "mode: machine-veth makes its own interface on the machine; drop parent:")]
        return []

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """The host's end takes no address: nothing to join."""

    def plan_options(self, link: LinkSpec) -> Options:
        return (("host_interface", link.host_interface),)

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        node = ends[0].node
        host = b.host_of(node) if b.t.hosts else None
        return AttachObj(ends[0], self.name, host, None, self.plan_options(link), link.mtu, shape=shapes(link.params)[0])

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import netlink

        for att in objs:
            wanted = att.text("host_interface")
            name = kernel_name(wanted)
            ap.queue(
                att.host,
                netlink.new_veth(name, att.end.iface, ap.fd(att.end.node), alias=ap.alias, mtu=att.mtu, macs=(None, att.end.mac)),
                netlink.set_up(name, alias=ap.alias),
            )
            if name != wanted:
                ap.queue(att.host, netlink.add_alt_name(name, wanted))
            made.append(att)
        ap.flush()
        into_switches(ap, [att.end for att in objs])
        up_and_address(ap, [att.end for att in objs])


def kernel_name(wanted: str) -> str:
    """``wanted`` if the kernel takes it as a name, else its first 8 characters, '-' and a 6-digit digest."""
    if len(wanted) <= IFNAMSIZ:
        return wanted
    return f"{wanted[:8]}-{hashlib.sha256(wanted.encode()).hexdigest()[:6]}"


register(MachineVeth())
