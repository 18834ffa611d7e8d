"""``servers:`` (in the topology, or an inventory file given with ``--servers``): the machines a lab is
split across, and the rules that tie nodes to them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pydantic import ValidationError

from .errors import Problem, TopologyError
from .schema import Topology
from .schema.base import NAME_PATTERN
from .schema.machines import ServerSpec, Stitch
from .yamlsource import Located, load_yaml, read_source


def _bad_name(name: str | int, located: Located) -> list[Problem]:
    """A server's name (under ``servers:`` of a topology or an inventory): letters, digits, '-' and '_', at most 20."""
    if re.match(NAME_PATTERN, str(name)) and len(str(name)) <= 20:
        return []
    message = f"server name '{name}' may use only letters, digits, '-' and '_' (at most 20)"
    return [located.problem(("servers", name), message, key=True)]


def check_servers(topology: Topology, located: Located) -> list[Problem]:
    """Server names, ``server:`` pins naming one, and no emulated ``hosts:`` beside real servers."""
    problems = [problem for name in topology.servers for problem in _bad_name(name, located)]
    if topology.servers and topology.hosts:
        problems.append(
            located.problem(
                ("servers",), "a lab runs either on emulated hosts: inside one machine or on servers:, not both", key=True
            )
        )
    for node, spec in topology.topology.nodes.items():  # without servers: here, an inventory (--servers) will say
        if spec.server and topology.servers and spec.server not in topology.servers:
            problems.append(
                located.problem(
                    ("topology", "nodes", node, "server"),
                    f"server '{spec.server}' is not under servers: (known: {', '.join(topology.servers)})",
                )
            )
    return problems


@dataclass(frozen=True)
class Inventory:
    """An inventory file (``--servers``) as read and checked, once: what a command hands on instead of its path."""

    source: str  # the file it came from
    servers: dict[str, ServerSpec]  # identity files made absolute from the inventory's folder
    stitch: Stitch | None = None  # its stitch:, if it has one


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """An inventory file: ``servers:`` (as in a topology) and optionally ``stitch:``; keys are checked with file:line."""
    source = str(path)
    located = load_yaml(read_source(path, "the inventory"), source)
    data = located.data
    if not isinstance(data, dict) or not isinstance(data.get("servers"), dict) or not data["servers"]:
        raise TopologyError(source, [located.problem((), "an inventory is a mapping with servers: NAME: {address: ..., ...}")])
    problems = [
        located.problem((key,), f"unknown key '{key}'; allowed here: servers, stitch", key=True)
        for key in data
        if key not in ("servers", "stitch")
    ]
    servers = {}
    for name, spec in data["servers"].items():
        problems += _bad_name(name, located)  # at the inventory's line, not the topology's
        try:
            servers[str(name)] = ServerSpec.model_validate(spec if isinstance(spec, dict) else {"address": spec})
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(located.problem(("servers", name, *err["loc"]), err["msg"].removeprefix("Value error, ")))
    stitch = None
    if "stitch" in data:
        try:
            stitch = Stitch.model_validate(data["stitch"])
        except ValidationError as exc:
            problems += [located.problem(("stitch", *err["loc"]), err["msg"]) for err in exc.errors()]
    if problems:
        raise TopologyError(source, problems)
    base = os.path.dirname(os.path.abspath(source))
    return Inventory(
        source,
        {
            name: spec.model_copy(update={"key": os.path.join(base, spec.key)}) if spec.key else spec
            for name, spec in servers.items()
        },
        stitch,
    )
