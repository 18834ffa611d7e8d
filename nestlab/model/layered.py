"""containerlab's inheritance read from a topology as data (``Lab.document()``): a node takes what its group,
its kind and ``defaults`` set and it does not, node > group > kind > defaults.  A running lab needs no schema
to ask."""

from __future__ import annotations

from typing import Any

from ..registry import KINDS


def kind_spec(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """The ``kinds:`` entry for ``kind`` (a canonical kind), under its name or one of its aliases."""
    return next((v for k, v in (doc["topology"].get("kinds") or {}).items() if KINDS.canonical(k) == kind), None) or {}


def layers(doc: dict[str, Any], node: str, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, spec) from the node itself down to ``defaults`` (``kind``: the node's canonical kind)."""
    body = doc["topology"]
    spec = body["nodes"].get(node) or {}
    group = (body.get("groups") or {}).get(spec.get("group") or "") or {}
    return [("node", spec), ("group", group), ("kind", kind_spec(doc, kind)), ("defaults", body.get("defaults") or {})]


def merged(doc: dict[str, Any], node: str, kind: str, key: str) -> dict[str, Any]:
    """A dict-valued key (``labels``, ``credentials``), each entry from the nearest layer that sets it."""
    out: dict[str, Any] = {}
    for _where, spec in reversed(layers(doc, node, kind)):
        out.update({k: v for k, v in (spec.get(key) or {}).items() if v is not None})
    return out
