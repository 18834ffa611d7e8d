"""A lab as containerlab shows its containers: names (``clab-LAB-NODE``), ids, labels, images, states and
management addresses, for ``nestlab clab inspect``/``events`` and the tools that read them.

A node's id is made from its network namespace (its inode, which lives as long as the node): 64 hex
digits as Docker's, the first 12 its short id.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import yaml

from .. import names
from ..backends.kernel import rtdump
from ..errors import LabError
from ..lab.lab import Lab
from ..model.layered import merged
from ..plan.mgmt import interfaces as management


def identity(lab: str, node: str) -> tuple[str, str]:
    """The node's (short id, full id); empty while its namespace does not exist."""
    path = names.netns_path(lab, node)
    if not os.path.exists(path):
        return "", ""
    full = hashlib.sha256(f"{lab}/{node}/{os.stat(path).st_ino}".encode()).hexdigest()
    return full[:12], full


def container_name(raw: dict[str, Any], node: str) -> str:
    return names.long_name(raw.get("prefix"), raw["name"], node)


def labels(raw: dict[str, Any], lab: str, node: str, kind: str, source: str) -> dict[str, str]:
    """The node's labels (with those its group, kind and ``defaults`` give) and containerlab's own
    (``exec --label`` filters on them)."""
    spec = raw["topology"]["nodes"].get(node.split("/", 1)[0], {})
    own = {k: str(v) for k, v in merged(raw, node.split("/", 1)[0], kind, "labels").items()}
    return {
        **own,
        "containerlab": lab,
        "clab-node-name": node,
        "clab-node-longname": container_name(raw, node),
        "clab-node-kind": names.clab_kind(kind),
        "clab-node-group": spec.get("group") or "",
        "clab-topo-file": os.path.abspath(source) if source else "",
    }


def states(running: Lab) -> dict[str, str]:
    """Each node's state (running, stopped, missing): asked of the shares for a lab elsewhere."""
    return running.site().states(running.blueprint)


def containers(name: str) -> list[dict[str, Any]]:
    """The lab's nodes as containerlab's ``inspect --format json`` lists its containers (with their labels)."""
    lab = Lab.running(name)
    raw = lab.document()
    nodes = raw["topology"]["nodes"]
    source = lab.source if os.path.exists(lab.source) else ""
    relative = os.path.relpath(source) if source else ""
    images = _images_in(source)
    attached = management(lab.plan)
    mgmt = {node: a.end for node, a in attached.items()}
    known = states(lab)
    listed = []
    for node, obj in lab.plan.nodes.items():
        spec = nodes.get(node.split("/", 1)[0], {})
        up = known.get(node) == "running"
        short, full = identity(name, node)
        listed.append(
            {
                "lab_name": name,
                "labPath": relative,
                "absLabPath": os.path.abspath(source) if source else "",
                "name": container_name(raw, node),
                "container_id": short,
                "image": obj.image or images.get(node) or "",
                "kind": names.clab_kind(obj.kind),
                "group": spec.get("group") or "",
                "state": "running" if up else "exited",
                "status": "Up" if up else "Exited",
                "ipv4_address": mgmt[node].ipv4[0] if node in mgmt else "N/A",
                "ipv6_address": mgmt[node].ipv6[0] if node in mgmt else "N/A",
                "owner": "root",
                "labels": labels(raw, name, node, obj.kind, source),
                "node": node,
                "full_id": full,
                "gateways": (str(attached[node].option("gateway4") or ""), str(attached[node].option("gateway6") or ""))
                if node in attached
                else ("", ""),
            }
        )
    return sorted(listed, key=lambda c: c["name"])


def _images_in(source: str) -> dict[str, str]:
    """Each node's image as the file names it (node, else its group, kind or the defaults), though nestlab runs
    a linux node as namespaces: tools that read inspect expect it."""
    try:
        with open(source) as fh:
            topology = (yaml.safe_load(fh) or {}).get("topology") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    groups, kinds, defaults = topology.get("groups") or {}, topology.get("kinds") or {}, topology.get("defaults") or {}
    found = {}
    for node, spec in (topology.get("nodes") or {}).items():
        spec = spec or {}
        group = groups.get(spec.get("group") or defaults.get("group")) or {}
        kind = kinds.get(spec.get("kind") or group.get("kind") or defaults.get("kind")) or {}
        image = spec.get("image") or group.get("image") or kind.get("image") or defaults.get("image")
        if image:
            found[node] = str(image)
    return found


def interfaces(name: str, node: str | None = None) -> list[dict[str, Any]]:
    """Each node's interfaces as containerlab's ``inspect interfaces`` lists them (``node``: that one alone,
    by its name or its long name)."""
    lab = Lab.running(name)
    raw = lab.document()
    nodes = [n for n in lab.plan.nodes if node in (None, n, container_name(raw, n))]
    if node is not None and not nodes:
        raise LabError(f"lab {name} has no node {node}")
    site = lab.site()
    reported = site.inspect(lab.blueprint, set(nodes))["nodes"] if site.shares() else []  # on servers, pods
    remote: dict[str, dict[str, Any]] = {str(n["name"]): n for n in reported}  # inspect's JSON: a node's name, its interfaces
    found = []
    for n in nodes:
        if n in remote:
            listed = [
                {
                    "name": i["name"],
                    "alias": "",
                    "mac": i.get("mac") or "",
                    "ifindex": 0,
                    "mtu": i["mtu"],
                    "type": "",
                    "state": i["state"].lower(),
                }
                for i in remote[n]["interfaces"]
            ]
        else:
            listed = [
                {
                    "name": i.name,
                    "alias": i.alias,
                    "mac": i.mac or "",
                    "ifindex": i.index,
                    "mtu": i.mtu,
                    "type": i.kind or "device",
                    "state": i.state.lower(),
                }
                for i in rtdump.of_namespace(names.netns_path(name, n))
                if i.name != "lo"
            ]
        found.append({"name": container_name(raw, n), "interfaces": listed})
    return found
