"""iperf3: an end host whose iperf3 server runs from the moment the lab is up (the far end of ``iperf3 -c``)."""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from ..plugins import Draft
from .base import NodeKind, register

if TYPE_CHECKING:
    from ..plan.objects import NodeObj
    from ..plugins import Applying

DEFAULT_PORT = 5201
_READY_S = 10.0  # how long a server may take to listen


class Iperf3(NodeKind):
    name = "iperf3"
    summary = "a traffic sink: a linux node whose iperf3 server listens from deploy on (server_port, default 5201)"
    endpoint = True
    tools = {"iperf3": "iperf3"}
    options = {
        "server_port": (
            int | None,
            {
                "default": None,
                "ge": 1,
                "le": 65535,
                "description": f"iperf3: the port its server listens on (default {DEFAULT_PORT})",
            },
        )
    }

    def plan(self, node: Draft) -> dict[str, Any]:
        return {"options": (("port", getattr(node.spec, "server_port", None) or DEFAULT_PORT),)}

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        """Start each node's server, then wait until every one listens (so a client may connect once deploy returns)."""
        from ..backends.kernel import detached
        from ..backends.kernel.sockets import listening

        servers = {}
        for node in nodes:
            port = node.number("port")
            servers[node.name] = (
                port,
                ap.popen(
                    node.name,
                    ["iperf3", "--server", "--port", str(port)],
                    **detached.options(stderr=subprocess.PIPE),
                ),
            )
        deadline = time.monotonic() + _READY_S
        for name, (port, proc) in servers.items():
            while not listening(proc.pid, port):
                if proc.poll() is not None:
                    raise LabError(
                        f"iperf3 server of {name} exited: {proc.stderr.read().decode().strip() if proc.stderr else ''}"
                    )
                if time.monotonic() > deadline:
                    raise LabError(f"iperf3 server of {name} does not listen on port {port} after {_READY_S:.0f} s")
                time.sleep(0.01)
            if proc.stderr:
                proc.stderr.close()

    def inspect(self, lab: str, node: NodeObj) -> dict[str, Any]:
        port = node.number("port")
        return {"iperf3": {"port": port}, "detail": f"server :{port}"}


register(Iperf3())
