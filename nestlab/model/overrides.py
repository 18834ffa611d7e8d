"""What a command line changes in a topology as it is read: containerlab's ``deploy --name``,
``--node-filter`` and the management flags (``--network``, ``--ipv4-subnet``, ``--ipv6-subnet``), and
the inventory of ``--servers`` (read once, before the topology; its ``servers:`` and ``stitch:`` replace
the file's before the topology is checked, once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .endpoint import Endpoint

if TYPE_CHECKING:
    from .servers import Inventory


@dataclass(frozen=True)
class Overrides:
    name: str | None = None
    nodes: frozenset[str] = frozenset()  # only these nodes, and the links between them (empty: all)
    network: str | None = None
    ipv4_subnet: str | None = None
    ipv6_subnet: str | None = None
    servers: Inventory | None = None  # --servers FILE, read

    def __bool__(self) -> bool:
        return any((self.name, self.nodes, self.network, self.ipv4_subnet, self.ipv6_subnet, self.servers))

    def apply(self, data: dict[str, Any]) -> None:
        """Change the file's data (before it is checked) as the flags say."""
        if self.name:
            data["name"] = self.name
        topology = data.get("topology")
        if self.nodes and isinstance(topology, dict) and isinstance(topology.get("nodes"), dict):
            topology["nodes"] = {n: spec for n, spec in topology["nodes"].items() if str(n) in self.nodes}
            topology["links"] = [ln for ln in topology.get("links") or [] if _within(ln, self.nodes)]
        given = {"network": self.network, "ipv4-subnet": self.ipv4_subnet, "ipv6-subnet": self.ipv6_subnet}
        if any(given.values()):
            found = data.get("mgmt")
            mgmt: dict[str, Any] = found if isinstance(found, dict) else {}
            data["mgmt"] = {**mgmt, **{k: v for k, v in given.items() if v}}
        if self.servers is not None:  # as data: the topology's one check takes them with the rest
            data["servers"] = {name: spec.model_dump() for name, spec in self.servers.servers.items()}
            if self.servers.stitch is not None:
                data["stitch"] = self.servers.stitch.model_dump()


def _within(link: object, nodes: frozenset[str]) -> bool:
    """A link (any of containerlab's forms) whose every endpoint is on one of ``nodes``."""
    if not isinstance(link, dict):
        return True
    ends = link.get("endpoints")
    if ends is None:  # the extended form: endpoint: / endpoints: [{node: ...}]
        ends = [link["endpoint"]] if "endpoint" in link else []
    names = [e.get("node") if isinstance(e, dict) else Endpoint(str(e)).node for e in ends or []]
    return all(n in nodes for n in names if n not in ("host", "mgmt-net", "macvlan"))
