"""ovs: an Open vSwitch switch in a namespace of its own, with its own ovsdb-server and ovs-vswitchd."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any, Literal

from ..plugins import Draft
from .base import Switch, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..backends.services.ovs import Switch as OvsSwitch
    from ..plan.machine import Machine
    from ..plan.objects import NodeObj
    from ..plugins import Applying


class Ovs(Switch):
    name = "ovs"
    summary = "an Open vSwitch bridge named after the node, with daemons of its own (kernel or userspace datapath)"
    takes_ports = True
    link_mode = "ovs"
    options = {
        "datapath": (
            Literal["auto", "kernel", "netdev"] | None,
            {
                "default": None,
                "description": "ovs: kernel datapath if the openvswitch module exists (auto), else userspace netdev",
            },
        ),
        "controller": (str | None, {"default": None, "description": "ovs: OpenFlow controller, e.g. tcp:10.0.0.1:6653"}),
        "flows": (list[str], {"default_factory": list, "description": "ovs: flows in ovs-ofctl add-flow syntax"}),
    }

    def plan(self, node: Draft) -> dict[str, Any]:
        spec = node.spec
        return {
            "datapath": getattr(spec, "datapath", None) or "auto",
            "controller": getattr(spec, "controller", None),
            "flows": tuple(getattr(spec, "flows", ())),
        }

    def started(self, ap: Applying, node: NodeObj, nl: Netlink) -> None:
        _switch(ap.lab, node).start(node.datapath or "auto", node.controller)

    def ports(self, ap: Applying, node: NodeObj, ifaces: list[str]) -> None:
        _switch(ap.lab, node).add_ports(ifaces)

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        for node in nodes:
            if node.flows:
                _switch(ap.lab, node).add_flows(list(node.flows))

    def resumed(self, ap: Applying, nodes: list[NodeObj]) -> None:
        for node in nodes:
            _switch(ap.lab, node).resume()
        self.finish(ap, nodes)  # flows are not kept in the database

    def port_removed(self, ap: Applying, node: NodeObj, iface: str) -> None:
        _switch(ap.lab, node).del_port(iface)

    def removed(self, lab: str, node: NodeObj) -> None:
        from ..backends.kernel import files
        from ..backends.services import ovs

        files.remove_tree(ovs.run_dir(lab, node.name))

    def missing(self, nodes: list[NodeObj]) -> list[str]:
        from ..backends.services import ovs

        problems = []
        if tools := [t for t in ovs.TOOLS if not shutil.which(t)]:
            problems.append(f"Open vSwitch tools {', '.join(tools)} (apt-get install openvswitch-switch)")
        if any(n.datapath == "kernel" for n in nodes) and not ovs.kernel_datapath_available():
            problems.append("the OVS kernel datapath (CONFIG_OPENVSWITCH); use datapath: netdev or auto")
        return problems

    def doctor(self, machine: Machine) -> list[tuple[str, bool, str, str]]:
        from ..backends.kernel import probe
        from ..backends.services import ovs

        kernel = ovs.kernel_datapath_available()
        user = bool(shutil.which("ovs-vswitchd")) and probe.kernel()["tun"][0]
        return [
            (
                "ovs-kernel",
                kernel,
                "openvswitch module loaded" if kernel else "no openvswitch module",
                "" if kernel else "a kernel with CONFIG_OPENVSWITCH (nestlab falls back to the netdev datapath)",
            ),
            (
                "ovs-netdev",
                user,
                "ovs-vswitchd and tun present" if user else "needs ovs-vswitchd and CONFIG_TUN",
                "" if user else "apt-get install openvswitch-switch",
            ),
        ]

    def inspect(self, lab: str, node: NodeObj) -> dict[str, Any]:
        info = _switch(lab, node).info()
        return {"ovs": info, "detail": f"{info['datapath']}, {info['checksums']}"}


def _switch(lab: str, node: NodeObj) -> OvsSwitch:
    """The node's switch and its daemons (backends/services/ovs.py), loaded by the first call that needs them:
    reading a topology loads no kernel code."""
    from ..backends.services import ovs

    return ovs.Switch(lab, node.name)


register(Ovs())
