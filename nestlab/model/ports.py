"""containerlab's ``ports:`` (Docker's publish forms): ``[127.0.0.1:]HOST:NODE[/tcp|/udp]``, forwarded from this
machine's loopback to the node only when the file says ``allow_host_ports: true``; otherwise each is a note."""

from __future__ import annotations

import re

from .errors import Problem
from .schema import Topology
from .yamlsource import Located

_FORM = re.compile(r"^(?:(?P<ip>[^:/]+|\[[^\]]+\]):)?(?P<host>\d{1,5}):(?P<node>\d{1,5})(?:/(?P<proto>\w+))?$")
_LOOPBACK = {None, "127.0.0.1", "localhost"}


def parse(text: str | int) -> tuple[int, int, str]:
    """(host port, node port, protocol) of one entry; ValueError says what is wrong and what to write."""
    found = _FORM.match(str(text).strip())
    if not found:
        raise ValueError(
            f"'{text}' is not HOST:NODE[/tcp|/udp] (e.g. 8080:80, 2222:22/tcp, 5353:53/udp); "
            "port ranges and a random host port are not supported"
        )
    if found["ip"] not in _LOOPBACK:
        raise ValueError(
            f"'{text}': nestlab forwards ports on this machine's loopback only (127.0.0.1), never on its "
            f"real addresses; write {found['host']}:{found['node']}"
        )
    proto = (found["proto"] or "tcp").lower()
    if proto not in ("tcp", "udp"):
        raise ValueError(f"'{text}': protocol {proto} is not forwarded; use tcp or udp")
    host, node = int(found["host"]), int(found["node"])
    if not (0 < host < 65536 and 0 < node < 65536):
        raise ValueError(f"'{text}': ports are 1-65535")
    return host, node, proto


def check_ports(topology: Topology, located: Located, notices: list[Problem]) -> list[Problem]:
    """Each entry parses and no host port is forwarded twice; without ``allow_host_ports`` a node's ports are a note."""
    problems: list[Problem] = []
    taken: dict[tuple[int, str], str] = {}
    for name, spec in topology.topology.nodes.items():
        if not spec.ports:
            continue
        path = ("topology", "nodes", name, "ports")
        if not topology.allow_host_ports:
            notices.append(
                located.problem(
                    path,
                    "ignored: ports are forwarded from this machine only with allow_host_ports: true at the top of the file",
                    key=True,
                )
            )
        for i, text in enumerate(spec.ports):
            try:
                host, _node, proto = parse(text)
            except ValueError as exc:
                problems.append(located.problem(path + (i,), str(exc)))
                continue
            if (host, proto) in taken:
                problems.append(
                    located.problem(path + (i,), f"host port {host}/{proto} is already forwarded to {taken[host, proto]}")
                )
            taken[host, proto] = name
    return problems
