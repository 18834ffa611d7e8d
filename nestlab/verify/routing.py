"""``route:``, ``ospf:`` and ``bgp:``: what a node's routing table holds, and the state of a routing daemon's
neighbor or peer (FRR's vtysh)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backends.services import frr
from ..model.checks import Bgp, Ospf, Route
from .probing import Probe, run_in

if TYPE_CHECKING:
    from ..lab.lab import Lab


def route(running: Lab, s: Route) -> Probe:
    """A route to ``prefix`` (in ``vrf``), through ``via`` if the check names a next hop."""
    args = ["ip", "-j", "route", "show", s.prefix] + (["vrf", s.vrf] if s.vrf else [])

    def probe() -> tuple[bool, str]:
        rc, out = run_in(running, s.node, args)
        routes = [r for r in json.loads(out or "[]") if rc == 0 and _same(r.get("dst"), s.prefix)]
        hops = {r.get("gateway") for r in routes} | {n.get("gateway") for r in routes for n in r.get("nexthops", [])}
        hops.discard(None)
        if not routes:
            return False, f"no route to {s.prefix}"
        seen = f"{s.prefix} via {', '.join(sorted(hops)) or 'a connected interface'}"
        return s.via is None or s.via in hops, seen

    return probe


def ospf(running: Lab, s: Ospf) -> Probe:
    """The OSPF neighbor ``neighbor`` of the node in ``state`` (Full, ...)."""

    def state(data: dict[str, Any]) -> str:
        states = [n.get("nbrState", "") for n in (data.get("neighbors") or {}).get(s.neighbor, [])]
        return states[0].split("/")[0] if states else "absent"

    return _daemon(running, s, "show ip ospf neighbor json", state, f"neighbor {s.neighbor}")


def bgp(running: Lab, s: Bgp) -> Probe:
    """The BGP peer ``peer`` of the node in ``state`` (Established, ...)."""
    return _daemon(
        running, s, "show bgp neighbors json", lambda data: (data.get(s.peer) or {}).get("bgpState", "absent"), f"peer {s.peer}"
    )


def _daemon(running: Lab, s: Ospf | Bgp, command: str, state_in: Callable[[dict[str, Any]], str], who: str) -> Probe:
    def probe() -> tuple[bool, str]:
        rc, out = run_in(running, s.node, frr.vtysh("-c", command))  # root's: never the daemons' vtysh.conf
        state = state_in(json.loads(out) if rc == 0 and out.strip().startswith("{") else {})
        return state.lower() == s.state.lower(), f"{who} {state}"

    return probe


def _same(dst: str | None, prefix: str) -> bool:
    if dst == "default":
        dst = "0.0.0.0/0"
    try:
        return dst is not None and ipaddress.ip_network(dst, strict=False) == ipaddress.ip_network(prefix)
    except ValueError:
        return False
