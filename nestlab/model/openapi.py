"""The topology's schema as Kubernetes takes it: pydantic's JSON Schema of :class:`~.schema.Topology`, made a
*structural* OpenAPI v3 schema (what a CustomResourceDefinition must hold), so the NestLab resource has no
second schema to keep.

What pydantic writes and a structural schema cannot hold, and what it becomes:

* ``$ref`` to ``$defs``: the definition, inlined (the model has no recursive type);
* ``X | None``: X with ``nullable: true``; ``str | int``: ``x-kubernetes-int-or-string``;
* any other union (``str | float``, ``bool | "auto"``, a string or a list): ``x-kubernetes-preserve-unknown-fields``,
  any value, which the model checks when the operator reads the resource;
* ``exclusiveMinimum: N`` (JSON Schema 2020-12): ``minimum: N`` with ``exclusiveMinimum: true`` (OpenAPI 3.0);
* ``const``: a one-value ``enum``; ``prefixItems`` (a fixed-length tuple): its items' common type, if any;
* ``pattern``: left out (Python's regular expressions are not the API server's; the model checks them);
* ``additionalProperties: false``, ``title``, ``default``: left out (the API server prunes unknown keys,
  and kubectl's strict field validation refuses them; defaults stay the model's, not written into the object).
"""

from __future__ import annotations

from typing import Any

_KEPT = {"type", "description", "enum", "format", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}
ANY: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


def topology_spec() -> dict[str, Any]:
    """The schema of a topology file's body without ``name:`` (a resource's name is its lab's) and ``servers:``
    (a Kubernetes lab's servers are the cluster's nodes)."""
    from .schema import Topology

    raw = Topology.model_json_schema(by_alias=True)
    spec = structural(raw, raw.get("$defs", {}))
    for key in ("name", "servers"):
        spec["properties"].pop(key)
    spec["required"] = [key for key in spec.get("required", []) if key != "name"]
    return spec


def structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` (a JSON Schema, ``$ref`` into ``defs``) as a structural OpenAPI v3 schema."""
    if "$ref" in node:
        return structural({**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    if "anyOf" in node:
        return _union(node, defs)
    out = _bounds(node)
    if "properties" in node:
        out["properties"] = {key: structural(value, defs) for key, value in node["properties"].items()}
        if node.get("required"):
            out["required"] = list(node["required"])
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = structural(node["additionalProperties"], defs)
    if "prefixItems" in node:
        items = [structural(item, defs) for item in node["prefixItems"]]
        out["items"] = items[0] if all(item == items[0] for item in items) else ANY
    elif "items" in node:
        out["items"] = structural(node["items"], defs)
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "type" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        return {**ANY, **({"description": node["description"]} if "description" in node else {})}
    return out


def _bounds(node: dict[str, Any]) -> dict[str, Any]:
    """What ``node`` keeps as it is, a ``const`` as a one-word ``enum``, exclusive bounds in OpenAPI v3's form."""
    out = {k: v for k, v in node.items() if k in _KEPT}
    if "const" in node:
        out["enum"] = [node["const"]]
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), int | float):
            out[inclusive], out[bound] = node[bound], True
    return out


def _union(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    branches = [structural(b, defs) for b in node["anyOf"] if b.get("type") != "null"]
    nullable = len(branches) < len(node["anyOf"])
    described = {"description": node["description"]} if "description" in node else {}
    if len(branches) == 1:
        return {**branches[0], **described, **({"nullable": True} if nullable else {})}
    if sorted(b.get("type", "") for b in branches) == ["integer", "string"]:
        return {"x-kubernetes-int-or-string": True, **described, **({"nullable": True} if nullable else {})}
    return {**ANY, **described}
