"""frr: a router running Debian's FRR in the node's own filesystem view (/etc/frr and /run/frr its own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..plugins import Draft
from .base import NodeKind, register

if TYPE_CHECKING:
    from ..plan.machine import Machine
    from ..plan.objects import NodeObj
    from ..plugins import Applying


class Frr(NodeKind):
    name = "frr"
    summary = (
        "a router: Debian's FRR daemons the configuration names, in the node's own /etc/frr (containerlab's frrouting/frr image)"
    )
    router = True
    config_file = "/etc/frr/frr.conf"
    images = ("frrouting/frr",)  # docker.io/frrouting/frr:v8.4.1, quay.io/frrouting/frr:...
    guest_as_root = True

    def plan(self, node: Draft) -> dict[str, Any]:
        from ..backends.services import frr

        own = (frr.folder_of(node.lab, node.name), frr.CONFIG_DIR, False)  # the daemons'
        boot = (frr.boot_dir(node.lab, node.name), frr.BOOT_DIR, True)  # root's, what root starts FRR from
        # Its plan object is a linux node that runs FRR: a router forwards (its own sysctls still win).
        return {
            "kind": "linux",
            "router": self.name,
            "sysctls": frr.SYSCTLS,
            "view": True,
            "binds": (own, boot),
            "run_dirs": ((frr.RUN_DIR, frr.USER),),
            "config": node.spec.startup_config or "",
        }

    def prepare(self, ap: Applying, node: NodeObj) -> None:
        from ..backends.services import frr

        frr.write(ap.lab, node.name, node.config or "", node.name.replace("/", "-"), _user(node))

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        from ..backends.services import frr

        for n in nodes:  # root's start files anew: nothing of the daemons' folder is run or sourced
            frr.boot(ap.lab, n.name, n.config or "", n.binds)
        frr.start({n.name: ((lambda args, node=n.name, **kw: ap.popen(node, args, **kw)), _user(n)) for n in nodes})

    def resumed(self, ap: Applying, nodes: list[NodeObj]) -> None:
        self.finish(ap, nodes)  # the daemons again, from a copy of the node's frr.conf (as saved, if it was)

    def doctor(self, machine: Machine) -> list[tuple[str, bool, str, str]]:
        from ..backends.services import frr

        why = frr.available()
        works = (
            "Debian's FRR, its daemons root in your namespace (rootless)"
            if machine.daemons_as_root
            else "Debian's FRR and its frr user"
        )
        return [("frr", why is None, works if why is None else why, "" if why is None else "apt-get install frr")]

    def missing(self, nodes: list[NodeObj]) -> list[str]:
        from ..backends.services import frr

        why = frr.available()  # "kind: frr needs ...": the deploy's message says "this lab needs ..."
        return [why.removeprefix("kind: frr needs ")] if why else []


def _user(node: NodeObj) -> str:
    """Who the router's daemons run as: its run folder's owner (frr; root in rootless mode without other ids mapped, as planned)."""
    from ..backends.services import frr

    return dict(node.run_dirs)[frr.RUN_DIR]


register(Frr())
