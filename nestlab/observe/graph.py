"""A lab's topology as a graph, and its exports: Mermaid, Graphviz dot, draw.io and JSON.

Vertices are namespaces (nodes, switches, emulated hosts); edges are links (labelled with
their interfaces, mode and shaping) and attachments (a node's interface on its host's NIC or
bridge).  A nested node and its components form a group; every emulated host is a cluster
holding what runs on it.  The JSON form is Cytoscape.js's ``elements``, which the live page
draws (observe/live.py).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any

from ..plan.objects import AttachObj, LinkObj, Pairs, Plan
from ..registry import KINDS

MACHINE = "this machine"  # where an attachment to a real interface of this machine hangs


def _shape(pairs: Pairs) -> str:
    d = dict(pairs)
    return " ".join(d[k] for k in ("rate", "delay", "loss") if k in d)


def shaping_label(link: LinkObj) -> str:
    a, b = _shape(link.shape_a), _shape(link.shape_b)
    if a == b:
        return a
    return f"{link.a.node}→ {a or '-'}, {link.b.node}→ {b or '-'}"


def elements(plan: Plan) -> dict[str, Any]:
    """Cytoscape.js elements: ``{"nodes": [{"data": ...}], "edges": [{"data": ...}]}``."""
    nodes = _node_vertices(plan)
    edges = [_link_edge(key, link) for key, link in plan.links.items()]
    for key, att in plan.attachments.items():
        host = att.host or MACHINE
        if host == MACHINE and not any(n["data"]["id"] == MACHINE for n in nodes):
            nodes.append({"data": {"id": MACHINE, "label": MACHINE, "kind": "machine", "runtime": None, "parent": None}})
        edges.append(_attachment_edge(key, att, host))
    return {"nodes": nodes, "edges": edges}


def _group_of(plan: Plan, name: str, has_components: set[str]) -> str | None:
    """The group a namespace is drawn in: its nested node's, else its emulated host's (None: neither)."""
    obj = plan.nodes[name]
    if obj.parent or name in has_components:
        return f"group:{obj.parent or name}"
    host = obj.name if KINDS.get(obj.kind).machine else obj.host
    return f"host:{host}" if host else None


def _node_vertices(plan: Plan) -> list[dict[str, Any]]:
    """The groups (nested nodes, emulated hosts holding them) first, then a vertex per namespace."""
    nodes, groups = [], {}
    has_components = {o.parent for o in plan.nodes.values() if o.parent}
    for name, obj in plan.nodes.items():
        parent = _group_of(plan, name, has_components)
        nodes.append({"data": {"id": name, "label": name, "kind": obj.kind, "runtime": obj.runtime, "parent": parent}})
        if parent and parent.startswith("group:"):
            owner = plan.nodes[parent[6:]]
            host = f"host:{owner.host}" if owner.host else None
            groups[parent] = {"id": parent, "label": f"{parent[6:]} (nested)", "kind": "group", "parent": host}
        if parent and parent.startswith("host:"):
            groups[parent] = {"id": parent, "label": f"host {parent[5:]}", "kind": "emulated-host", "parent": None}
    for group in list(groups.values()):
        if group["parent"] and group["parent"] not in groups:
            groups[group["parent"]] = {
                "id": group["parent"],
                "label": f"host {group['parent'][5:]}",
                "kind": "emulated-host",
                "parent": None,
            }
    return [{"data": g} for g in groups.values()] + nodes


def _link_edge(key: str, link: LinkObj) -> dict[str, Any]:
    """A link's edge, labelled with its interfaces and shaping."""
    return {
        "data": {
            "id": key,
            "source": link.a.node,
            "target": link.b.node,
            "kind": "link",
            "mode": link.mode,
            "a": link.a.ref,
            "b": link.b.ref,
            "label": f"{link.a.iface} – {link.b.iface}",
            "shaping": shaping_label(link),
            "state": link.state or "up",
        }
    }


def _attachment_edge(key: str, att: AttachObj, host: str) -> dict[str, Any]:
    """An attachment's edge, from the node to its host (or this machine), labelled with what it sits on."""
    under = att.parent or att.option("bridge")
    return {
        "data": {
            "id": key,
            "source": att.end.node,
            "target": host,
            "kind": "attachment",
            "mode": att.mode,
            "a": att.end.ref,
            "b": f"{host}:{under}",
            "label": f"{att.end.iface} – {att.mode} on {under}",
            "shaping": "",
            "state": "up",
        }
    }


def _vertices(els: dict[str, Any]) -> list[dict[str, Any]]:
    return [n["data"] for n in els["nodes"] if n["data"]["kind"] not in ("group", "emulated-host")]


def _clusters(els: dict[str, Any]) -> list[dict[str, Any]]:
    return [n["data"] for n in els["nodes"] if n["data"]["kind"] in ("group", "emulated-host")]


def _nested(
    els: dict[str, Any], opening: Callable[[dict[str, Any]], list[str]], closing: str, vertex: Callable[[dict[str, Any]], str]
) -> list[str]:
    """Lines for every cluster (its ``opening`` lines, its contents, ``closing``) and vertex, nested and indented as the lab is."""
    lines: list[str] = []

    def walk(parent: str | None, indent: str) -> None:
        for c in _clusters(els):
            if c["parent"] == parent:
                lines.extend(indent + line for line in opening(c))
                walk(c["id"], indent + "  ")
                lines.append(indent + closing)
        lines.extend(indent + vertex(v) for v in _vertices(els) if v["parent"] == parent)

    walk(None, "  ")
    return lines


def _drawn_as(kind: str) -> str:
    """How a vertex of ``kind`` is drawn: a switch, a machine, or a node (what its kind says it is)."""
    found = KINDS.get(kind) if kind in KINDS else None
    return "switch" if found and found.switch else "machine" if found and found.machine else "node"


def _edge_label(e: dict[str, Any]) -> str:
    return " ".join(x for x in (e["label"], f"({e['mode']})", e["shaping"]) if x)


def to_json(plan: Plan) -> str:
    return json.dumps(elements(plan), indent=1)


def to_mermaid(plan: Plan) -> str:
    els = elements(plan)
    ids = {d["id"]: f"n{i}" for i, d in enumerate(_vertices(els) + _clusters(els))}
    shapes = {"node": ('["', '"]'), "switch": ('{{"', '"}}'), "machine": ('[("', '")]')}

    def vertex(v: dict[str, Any]) -> str:
        left, right = shapes[_drawn_as(v["kind"])]
        return f"{ids[v['id']]}{left}{v['label']} ({v['kind']}){right}"

    lines = ["flowchart LR", *_nested(els, lambda c: [f'subgraph {ids[c["id"]]}["{c["label"]}"]'], "end", vertex)]
    for e in (x["data"] for x in els["edges"]):
        style = "-.-" if e["state"] == "down" else "---"
        lines.append(f'  {ids[e["source"]]} {style}|"{_edge_label(e)}"| {ids[e["target"]]}')
    return "\n".join(lines) + "\n"


def _q(text: str) -> str:
    """A double-quoted dot string."""
    return json.dumps(text, ensure_ascii=False)


def to_dot(plan: Plan) -> str:
    els = elements(plan)
    shapes = {"node": "box", "switch": "hexagon", "machine": "box3d"}
    lines = ["graph lab {", "  compound=true; rankdir=LR; node [fontname=Helvetica]; edge [fontname=Helvetica, fontsize=10];"]

    lines += _nested(
        els,
        lambda c: [f'subgraph "cluster_{c["id"]}" {{', f"  label={_q(c['label'])}; style=rounded;"],
        "}",
        lambda v: f"{_q(v['id'])} [label={_q(v['label'] + chr(10) + v['kind'])}, shape={shapes[_drawn_as(v['kind'])]}];",
    )
    for e in (x["data"] for x in els["edges"]):
        style = ", style=dashed" if e["state"] == "down" else ""
        lines.append(f"  {_q(e['source'])} -- {_q(e['target'])} [label={_q(_edge_label(e))}{style}];")
    return "\n".join(lines) + "\n}\n"


def to_drawio(plan: Plan) -> str:
    """A draw.io (mxGraph) file: clusters as containers, vertices on a grid inside them (Arrange > Layout re-lays it out)."""
    els = elements(plan)
    styles = {
        "node": "rounded=1;whiteSpace=wrap;",
        "switch": "shape=hexagon;whiteSpace=wrap;",
        "machine": "shape=cube;whiteSpace=wrap;",
    }
    cells: list[tuple[str, str, str, str | None, tuple[int, int, int, int]]] = []
    ids: dict[str | None, str] = {}
    w, h, gap = 120, 50, 30

    def place(parent: str | None) -> tuple[int, int]:
        """Lay out ``parent``'s children (clusters first) in a grid; returns the size they take."""
        children = [c for c in _clusters(els) if c["parent"] == parent] + [v for v in _vertices(els) if v["parent"] == parent]
        cols = max(1, math.ceil(math.sqrt(len(children))))
        x = y = row_h = 0
        width = 0
        sizes = []
        for i, child in enumerate(children):
            if i and i % cols == 0:
                x, y, row_h = 0, y + row_h + gap, 0
            cw, ch = place(child["id"]) if child["kind"] in ("group", "emulated-host") else (w, h)
            if child["kind"] in ("group", "emulated-host"):
                cw, ch = cw + 2 * gap, ch + 2 * gap
            sizes.append((child, x + gap, y + gap + (20 if parent else 0), cw, ch))
            x += cw + gap
            row_h = max(row_h, ch)
            width = max(width, x)
        for child, cx, cy, cw, ch in sizes:
            ids[child["id"]] = f"c{len(ids) + 2}"
            style = "swimlane;rounded=1;" if child["kind"] in ("group", "emulated-host") else styles[_drawn_as(child["kind"])]
            label = child["label"] if child["kind"] in ("group", "emulated-host") else f"{child['label']}&#10;{child['kind']}"
            cells.append((ids[child["id"]], label, style, child["parent"], (cx, cy, cw, ch)))
        return width + gap, y + row_h + 2 * gap

    place(None)
    out = ['<mxfile host="nestlab"><diagram name="lab"><mxGraphModel><root>', '<mxCell id="0"/>', '<mxCell id="1" parent="0"/>']
    for cid, label, style, parent, (x, y, cw, ch) in cells:
        out.append(
            f'<mxCell id="{cid}" value="{html.escape(label, quote=True).replace("&amp;#10;", "&#10;")}" style="{style}" vertex="1" '
            f'parent="{ids.get(parent, "1")}"><mxGeometry x="{x}" y="{y}" width="{cw}" height="{ch}" as="geometry"/></mxCell>'
        )
    for i, e in enumerate(x["data"] for x in els["edges"]):
        dashed = "dashed=1;" if e["state"] == "down" else ""
        out.append(
            f'<mxCell id="e{i}" value="{html.escape(_edge_label(e), quote=True)}" style="endArrow=none;{dashed}" edge="1" '
            f'parent="1" source="{ids[e["source"]]}" target="{ids[e["target"]]}"><mxGeometry relative="1" as="geometry"/></mxCell>'
        )
    out.append("</root></mxGraphModel></diagram></mxfile>")
    return "\n".join(out) + "\n"


EXPORTS = {"mermaid": to_mermaid, "dot": to_dot, "drawio": to_drawio, "json": to_json}
