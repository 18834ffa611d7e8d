"""containerlab's ``generate``: a CLOS topology of tiers, each node of a tier linked to every node of the next."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer
import yaml

from ...backends.kernel import files
from ...errors import LabError
from ..common import err, ignored, reported, split_list
from .base import Ignored, clab_app
from .lifecycle import deploy_topology

INTERFACES = {"srl": "e1-{}", "nokia_srlinux": "e1-{}"}  # a kind's interface names (default eth{})


@clab_app.command()
def generate(
    name: str = typer.Option(..., "--name", help="The lab's name."),
    nodes: list[str] = typer.Option(
        ..., "--nodes", help="Nodes per tier, comma-separated, each N[:KIND[:TYPE]] (e.g. 4,2:frr,1:linux)."
    ),
    kind: str = typer.Option("linux", "--kind", help="Kind of a tier that names none (containerlab's default is srl)."),
    image: list[str] = typer.Option([], "--image", help="KIND=IMAGE (or IMAGE for --kind), repeatable."),
    node_prefix: str = typer.Option("node", "--node-prefix", help="Node names: PREFIX<tier>-<n>."),
    group_prefix: str = typer.Option("tier", "--group-prefix", help="Group names: PREFIX-<tier>."),
    network: str = typer.Option("", "--network", help="Management network name."),
    ipv4_subnet: str = typer.Option("", "--ipv4-subnet", help="Management IPv4 subnet."),
    ipv6_subnet: str = typer.Option("", "--ipv6-subnet", help="Management IPv6 subnet."),
    file: Path | None = typer.Option(None, "--file", help="Write the topology here (default: print it)."),
    deploy: bool = typer.Option(False, "--deploy", help="Deploy it too (written to NAME.clab.yml unless --file)."),
    licenses: list[str] = typer.Option(
        [], "--license", help="KIND=PATH (or PATH for --kind), repeatable: the kind's license: in the file."
    ),
    workers: int = typer.Option(0, "--max-workers", **Ignored),
    owner: str = typer.Option("", "--owner", **Ignored),
):
    """Generate a CLOS topology (containerlab generate): tiers of nodes, every node of a tier linked to every
    node of the next.  Example: nestlab clab generate --name clos --nodes 4,2:frr --deploy"""
    if workers:
        ignored("--max-workers", "nestlab makes every node in one process, in batches")
    if owner:
        ignored("--owner", "the lab directory's files belong to whoever owns the folder it is in")
    with reported():
        found = topology(
            name, split_list(nodes), kind, split_list(image), node_prefix, group_prefix, (network, ipv4_subnet, ipv6_subnet)
        )
        for given in split_list(licenses):
            owner_kind, _, path = given.rpartition("=")
            found["topology"].setdefault("kinds", {}).setdefault(owner_kind or kind, {})["license"] = path
        if "kinds" in found["topology"]:  # containerlab writes kinds: before nodes:
            found["topology"] = {"kinds": found["topology"].pop("kinds"), **found["topology"]}
        text = yaml.safe_dump(found, sort_keys=False)
        if deploy and file is None:
            file = Path(f"{name}.clab.yml")
        if file is None:
            sys.stdout.write(text)
            return
        files.write(file, text, 0o644)  # through no link another user planted
        err.line(f"wrote {file}")
    if deploy:
        deploy_topology(file, None, True, [], [], (None, None, None))


def topology(
    name: str,
    tiers: list[str],
    kind: str,
    images: list[str],
    node_prefix: str,
    group_prefix: str,
    mgmt: tuple[str, str, str],
) -> dict:
    """containerlab's generated file, as data."""
    parsed = []
    for tier in tiers:
        found = re.fullmatch(r"(\d+)(?::([A-Za-z0-9_-]+))?(?::([A-Za-z0-9_.-]+))?", tier)
        if not found or int(found.group(1)) < 1:
            raise LabError(f"--nodes {tier}: give N[:KIND[:TYPE]] with N at least 1, e.g. 4 or 2:frr")
        parsed.append((int(found.group(1)), found.group(2) or kind, found.group(3)))
    kinds: dict[str, dict] = {}
    for given in images:
        owner, _, img = given.rpartition("=")
        kinds.setdefault(owner or kind, {})["image"] = img
    out: dict = {"name": name}
    settings = dict(zip(("network", "ipv4-subnet", "ipv6-subnet"), mgmt))
    if any(settings.values()):
        out["mgmt"] = {k: v for k, v in settings.items() if v}
    node_specs: dict[str, dict] = {}
    links: list[dict] = []

    def add(tier: int, n: int) -> str:
        node = f"{node_prefix}{tier + 1}-{n + 1}"
        count, tier_kind, typ = parsed[tier]
        node_specs.setdefault(node, {"group": f"{group_prefix}-{tier + 1}", "kind": tier_kind, **({"type": typ} if typ else {})})
        return node

    for j in range(parsed[0][0]):
        add(0, j)
    for i in range(len(parsed) - 1):
        offset = parsed[i - 1][0] if i > 0 else 0
        for j in range(parsed[i][0]):
            a = add(i, j)
            for k in range(parsed[i + 1][0]):
                b = add(i + 1, k)
                a_if = INTERFACES.get(parsed[i][1], "eth{}").format(k + 1 + offset)
                b_if = INTERFACES.get(parsed[i + 1][1], "eth{}").format(j + 1)
                links.append({"endpoints": [f"{a}:{a_if}", f"{b}:{b_if}"]})
    out["topology"] = {**({"kinds": kinds} if kinds else {}), "nodes": node_specs, "links": links}
    return out
