"""wireless: a radio channel shared by the stations linked to it, in a namespace of its own (docs/wireless.md).

Each link ending in it (``["a:wlan0", "air:a"]``) is an ordinary veth whose far end is a port of the
medium; the medium's process (backends/services/medium.py) carries every frame to the stations in range
of its sender, at the rate their signal allows, sharing the channel's airtime among them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from ..plugins import Draft, Keys
from .base import Switch, register

if TYPE_CHECKING:
    from ..model.schema import Topology
    from ..model.schema.nodes import NodeSpec
    from ..plan.objects import NodeObj
    from ..plugins import Applying

DEFAULTS = {"standard": "802.11g", "noise_floor": -91.0, "tx_power": 20.0, "antenna_gain": 0.0}


def _medium_keys() -> Mapping[str, tuple[Any, dict[str, Any]]]:
    """model/wireless.py's table of the medium's keys, read when first asked: its types are pydantic models, and
    pydantic (0.05 s) is loaded to check a topology, not to look at a running lab."""
    from ..model import wireless

    return wireless.MEDIUM_KEYS


def _station_keys() -> Mapping[str, tuple[Any, dict[str, Any]]]:
    """A station's keys (on the link to the medium), as :func:`_medium_keys`."""
    from ..model import wireless

    return wireless.STATION_KEYS


class Wireless(Switch):
    name = "wireless"
    summary = "a wireless medium: stations linked to it hear each other by distance, at their signal's rate, sharing airtime"
    options = Keys(_medium_keys)
    node_options = Keys(_station_keys)
    takes_ports = True  # each new port's station loses its offloads, a station made anew alone too

    def check(self, spec: NodeSpec) -> list[tuple[tuple[str | int, ...], str]]:
        from ..model.wireless import channel_problem, phy_problem  # a topology being checked: pydantic is loaded

        standard = str(spec.standard or DEFAULTS["standard"])
        if spec.channel is not None and (problem := channel_problem(standard, spec.channel)):
            return [(("channel",), problem)]
        if wrong := phy_problem(standard, spec.width, spec.streams, spec.short_gi):
            return [((wrong[0],), wrong[1])]
        return []

    def plan(self, node: Draft) -> dict[str, Any]:
        assert node.topology is not None
        spec = node.spec
        config = {
            "standard": spec.standard or DEFAULTS["standard"],
            "channel": spec.channel,
            "noise_floor": spec.noise_floor if spec.noise_floor is not None else DEFAULTS["noise_floor"],
            "propagation": spec.propagation.model_dump() if spec.propagation else {},
            "rate_control": spec.rate_control or "ideal",
            "fading": spec.fading.model_dump() if spec.fading else None,
            "mobility": spec.mobility.model_dump() if spec.mobility else None,
            "width": spec.width,
            "streams": spec.streams or 1,
            "short_gi": bool(spec.short_gi),
        }
        # the stations change live: a station added, removed or moved by a deploy leaves the medium running
        live = (("stations", json.dumps(stations(node.topology, node.name), sort_keys=True)),)
        return {"options": (("medium", json.dumps(config, sort_keys=True)),), "live": live}

    def ports(self, ap: Applying, node: NodeObj, ifaces: list[str]) -> None:
        from ..backends.services import medium

        made = set(ifaces)
        for station in config(node)["stations"]:
            if station["port"] in made:
                medium.plain_frames(ap.lab, station["name"], station["iface"])

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        from ..backends.services import medium

        for node in nodes:
            medium.start(ap.lab, node.name, config(node), lambda args, _n=node.name, **kw: ap.popen(_n, args, **kw))

    def retuned(self, ap: Applying, nodes: list[NodeObj]) -> None:
        """Stations added, removed or changed by a deploy: the running medium takes them as they are now (their
        new ports made, without offloads, by :meth:`ports`)."""
        from ..backends.services import medium

        for node in nodes:
            medium.ask(ap.lab, node.name, {"op": "stations", "stations": config(node)["stations"]})

    def resumed(self, ap: Applying, nodes: list[NodeObj]) -> None:
        for node in nodes:
            self.ports(ap, node, [station["port"] for station in config(node)["stations"]])
        self.finish(ap, nodes)

    def removed(self, lab: str, node: NodeObj) -> None:
        from ..backends.kernel import files
        from ..backends.services import medium

        for suffix in (".json", ".log", ".sock"):
            files.unlink(os.path.join(medium.folder(lab), node.name + suffix))
        if os.path.isdir(medium.folder(lab)) and not os.listdir(medium.folder(lab)):
            files.remove_tree(medium.folder(lab))

    def inspect(self, lab: str, node: NodeObj) -> dict[str, Any]:
        from ..backends.services import medium

        try:
            state = medium.ask(lab, node.name, {"op": "state"}, timeout=3)
        except LabError as exc:
            why = medium.trouble(lab, node.name) or str(exc)
            return {"wireless": {"error": why}, "detail": f"medium down: {why}"}
        model = config(node)["propagation"].get("model", "log-distance")
        detail = f"{state['standard']}, {len(state['stations'])} stations, {model}"
        return {"wireless": state, "detail": detail}


def config(node: NodeObj) -> dict[str, Any]:
    """A medium's plan as its process takes it: the radio's keys and, kept apart (they change live), its stations
    (a lab recorded before stations were kept apart has them among the keys)."""
    medium = json.loads(node.text("medium"))
    live = dict(node.live).get("stations")
    return {**medium, "stations": json.loads(str(live)) if live is not None else medium.get("stations", [])}


def stations(topology: Topology, medium: str) -> list[dict[str, Any]]:
    """The stations linked to ``medium``: name, interface, its port on the medium and radio keys."""
    out = []
    for link in topology.topology.links:
        ends = list(link.endpoints)
        if len(ends) != 2 or medium not in (ends[0].node, ends[1].node):
            continue
        port, station = (ends[1], ends[0]) if ends[1].node == medium else (ends[0], ends[1])
        spec = topology.topology.nodes[station.node]
        out.append(
            {
                "name": station.node,
                "iface": station.iface,
                "port": port.iface,
                "position": spec.position or [0.0, 0.0, 0.0],
                "tx_power": spec.tx_power if spec.tx_power is not None else DEFAULTS["tx_power"],
                "antenna_gain": spec.antenna_gain if spec.antenna_gain is not None else DEFAULTS["antenna_gain"],
            }
        )
    return out


register(Wireless())
