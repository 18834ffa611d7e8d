"""bridge: a node's veth hangs on a Linux bridge in its host's namespace (LXC's lxcbr0, Docker's docker0).

The bridge may take a host NIC as uplink (``parent:``; the NIC's address moves to the bridge),
or be a NAT gateway (``nat: true``, ``publish:`` ports).  ``bridge_netfilter: true`` reproduces
Docker's default path: bridged frames pass the host's iptables hooks (bridge-nf-call-iptables)
through Docker-like filter and NAT rules with connection tracking.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..plan.objects import AttachObj, EndObj, HostBridge, LinkObj, Options
from .base import KernelFeature, LinkMode, Stage, register, up_and_address

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import NodeObj
    from ..plugins import Applying, Checking, Planning

_PUBLISH = re.compile(r"^(\d{1,5})/(tcp|udp)$")
NETFILTER_SYSCTLS = {"net.bridge.bridge-nf-call-iptables": "1", "net.bridge.bridge-nf-call-ip6tables": "1"}


def host_veth_name(attachment_key: str) -> str:
    """The host-side name of a bridge-mode veth (``veth`` + 8 hex digits, stable per attachment)."""
    return f"veth{zlib.crc32(attachment_key.encode()):08x}"


class Bridge(LinkMode):
    name = "bridge"
    summary = "a veth to a bridge in the host (bridge:), with a NIC uplink (parent:) or NAT (nat:, publish:)"
    ends = 1
    stage = Stage.ATTACH
    options = {
        "bridge": (str | None, {"default": None, "description": "the host bridge's name (default br0)"}),
        "nat": (bool | None, {"default": None, "description": "host is the gateway, masquerading out of its NICs"}),
        "publish": (
            list[str],
            {"default_factory": list, "description": "with nat: ports forwarded from the host, e.g. 5201/tcp"},
        ),
        "bridge_netfilter": (
            bool | None,
            {"default": None, "description": "Docker's default path: bridged traffic through iptables"},
        ),
    }
    features = {
        "bridge-nf": KernelFeature("CONFIG_BRIDGE_NETFILTER", sysctl="net.bridge.bridge-nf-call-iptables", module="br_netfilter")
    }

    def needs(self, att: LinkObj | AttachObj) -> set[str]:
        return {"bridge-nf"} if att.flag("netfilter") else set()

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        problems = [
            ctx.problem(path + ("publish",), f"'{port}' must look like 5201/tcp or 11111/udp")
            for port in link.publish
            if not _PUBLISH.match(port)
        ]
        if link.nat and link.parent:
            problems.append(
                ctx.problem(
                    path + ("nat",), "nat: true routes out of the host's NICs; it cannot also bridge a NIC (drop parent: or nat:)"
                )
            )
        if link.publish and not link.nat:
            problems.append(
                ctx.problem(path + ("publish",), "publish: forwards ports from the host's NICs, which needs nat: true")
            )
        return problems

    def check_parent(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem] | None:
        if ctx.parent_of(link)[0] is None:
            return [
                ctx.problem(
                    path + ("parent",),
                    "bridge mode on a real interface would re-plumb this machine's own network; use macvlan, ipvlan or phys",
                )
            ]
        return None

    # -- plan --------------------------------------------------------------------------------------------
    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        host, parent = b.attach_point(link)
        assert host is not None, "an attachment's host is known once the model has checked the file"
        name = link.bridge or "br0"
        b.seg.join(keys[0], ("hbr", host, name))
        if link.nat:
            b.seg.member((host, name))
            b.seg.join((host, name), ("hbr", host, name))
            b.machine(host, {"net.ipv4.ip_forward": "1"})
        if link.bridge_netfilter:
            b.machine(host, NETFILTER_SYSCTLS)
        if parent:
            b.seg.join((host, parent), ("hbr", host, name))

    def plan_options(self, link: LinkSpec) -> Options:
        return (("bridge", link.bridge or "br0"),) + ((("netfilter", True),) if link.bridge_netfilter else ())

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        att = super().build(b, link, ends)
        assert isinstance(att, AttachObj)
        gateway = b.members[(att.host, link.bridge or "br0")].ipv4[0].split("/")[0] if link.nat else None
        return replace(
            att, mtu=link.mtu or (b.nic_mtu(att.host, att.parent) if att.host and att.parent else None), gateway=gateway
        )

    def prepare(self, b: Planning) -> None:
        """Record each host's bridges; an uplink NIC's address moves to its bridge."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for link in b.links_of(self.name):
            host, parent = b.attach_point(link)
            assert host is not None, "an attachment's host is known once the model has checked the file"
            entry = found.setdefault(
                (host, link.bridge or "br0"), {"uplink": None, "nat": False, "publish": [], "netfilter": False}
            )
            entry["uplink"] = entry["uplink"] or parent
            entry["nat"] |= bool(link.nat)
            entry["netfilter"] |= bool(link.bridge_netfilter)
            if link.publish:
                target = b.members[link.endpoints[0].key].ipv4[0].split("/")[0]
                entry["publish"] += [(p.split("/")[1], int(p.split("/")[0]), target) for p in link.publish]
        for (host, name), entry in found.items():
            addresses: tuple[str, ...] = ()
            if entry["nat"]:
                addresses = tuple(b.members[(host, name)].ipv4)
            elif entry["uplink"]:
                on = b.wire_of(host, entry["uplink"])
                if on is None:
                    b.fail(f"bridge {name} of host {host}: its uplink {entry['uplink']} is on no wire")
                wire, nic = on
                addresses = nic.ipv4 + nic.ipv6
                bare = EndObj(nic.node, nic.iface)
                ends = (bare, wire.b) if nic is wire.a else (wire.a, bare)
                b.plan.add(LinkObj(ends[0], ends[1], wire.mtu, shape_a=wire.shape_a, shape_b=wire.shape_b))
            bridge = HostBridge(name, entry["uplink"], addresses, entry["nat"], tuple(entry["publish"]), entry["netfilter"])
            b.plan.nodes[host] = replace(b.plan.nodes[host], bridges=b.plan.nodes[host].bridges + (bridge,))

    # -- apply -------------------------------------------------------------------------------------------
    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import nat, netlink

        hosts = [n for n in changes.add_nodes if n.bridges]
        self._host_bridges(ap, hosts)
        lookups = [ap.queue(att.host, netlink.get_link(att.text("bridge"))) for att in objs]
        answers = ap.flush()
        for att, slot in zip(objs, lookups):
            master = answers[att.host][slot]
            ap.queue(
                att.host,
                netlink.new_veth(
                    host_veth_name(att.key), att.end.iface, ap.fd(att.end.node), alias=ap.alias, mtu=att.mtu, master=master
                ),
            )
            made.append(att)
        ap.flush()
        up_and_address(ap, [att.end for att in objs], {att.end.node: att.gateway for att in objs if att.gateway})
        for host in hosts:
            if any(br.nat or br.netfilter for br in host.bridges):
                nat.apply(ap.path(host.name), list(host.bridges))

    def _host_bridges(self, ap: Applying, hosts: list[NodeObj]) -> None:
        """Bridges in hosts' namespaces: created up, uplink NIC enslaved, the host's address on the bridge."""
        from ..backends.kernel import netlink

        slots = [
            (host, br, ap.queue(host.name, netlink.new_bridge(br.name, ap.alias), netlink.get_link(br.name)) + 1)
            for host in hosts
            for br in host.bridges
        ]
        answers = ap.flush()
        for host, br, slot in slots:
            if br.uplink:
                ap.queue(host.name, netlink.set_master(br.uplink, answers[host.name][slot]))
        ap.address(
            [
                EndObj(
                    host.name, br.name, tuple(a for a in br.addresses if ":" not in a), tuple(a for a in br.addresses if ":" in a)
                )
                for host, br, _ in slots
            ]
        )


register(Bridge())
