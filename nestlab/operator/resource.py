"""The NestLab resource (``nestlab.dev/v1alpha1``): its CustomResourceDefinition, whose ``spec`` schema is the
topology's (model/openapi.py), and a resource read into the lab it asks for, once, where the operator takes it."""

from __future__ import annotations

import json
from typing import Any

from ..model.errors import TopologyError, dotted
from ..model.openapi import ANY, topology_spec
from ..plan.blueprint import Blueprint
from . import inputs

GROUP, VERSION, KIND, PLURAL, SHORT = "nestlab.dev", "v1alpha1", "NestLab", "nestlabs", "nl"
API_VERSION = f"{GROUP}/{VERSION}"
FINALIZER = f"{GROUP}/pods"  # held until every pod and object of the lab is gone
PHASES = ["Pending", "Deploying", "Ready", "Failed", "Deleting"]
MAX_SPEC_BYTES = 512 * 1024  # a spec's JSON: a 1000-node lab is about 100 KiB
MAX_NODES = 1000  # a lab's nodes, after groups and nesting

_CONDITION = {
    "type": "object",
    "required": ["type", "status"],
    "properties": {
        "type": {"type": "string", "description": "Ready or Degraded"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string"},
        "message": {"type": "string"},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "observedGeneration": {"type": "integer"},
    },
}
_NODE = {
    "type": "object",
    "properties": {
        "pod": {"type": "string", "description": "the pod holding the node (its share's)"},
        "clusterNode": {"type": "string", "description": "the Kubernetes node that pod runs on"},
        "state": {"type": "string", "description": "running, or what keeps its pod from running"},
        "addresses": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
            "description": "its addresses by interface (eth0: the management network's)",
        },
    },
}
STATUS_SCHEMA = {
    "type": "object",
    "properties": {
        "phase": {"type": "string", "enum": PHASES},
        "message": {"type": "string", "description": "what the operator last did, or why it failed"},
        "observedGeneration": {"type": "integer", "description": "the spec's generation this status describes"},
        "nodeCount": {"type": "integer", "description": "the lab's nodes"},
        "conditions": {
            "type": "array",
            "items": _CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "nodes": {"type": "object", "additionalProperties": _NODE, "description": "each lab node's pod, cluster node, state"},
    },
}


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition of NestLab: ``spec`` a topology file without its ``name:`` (metadata.name)."""
    spec = resource_spec()
    spec["description"] = "a topology file's body (topology:, mgmt:, checks:, ...) without name: (the resource's name)"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/name": "nestlab"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "plural": PLURAL, "singular": KIND.lower(), "shortNames": [SHORT], "categories": ["nestlab"]},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Nodes", "type": "integer", "jsonPath": ".status.nodeCount"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": STATUS_SCHEMA,
                            },
                        }
                    },
                }
            ],
        },
    }


def resource_spec() -> dict[str, Any]:
    """The topology's schema with every file key (inputs.FILE_KEYS) taking the text itself or a ``valueFrom`` (any
    value, which inputs.py checks), and ``env-files`` beside each ``binds``."""
    spec = topology_spec()
    _file_keys(spec)
    return spec


def _file_keys(node: dict[str, Any]) -> None:
    props = node.get("properties") or {}
    for key in [k for k in props if inputs.FILE_KEYS.get(k, "refused") != "refused"]:  # a refused one stays a string
        if key == "binds":
            props[key] = {"type": "array", "items": ANY, "description": "{path: FILE, content: TEXT | valueFrom: {...}, mode}"}
        else:
            props[key] = {
                **ANY,
                "description": f"{key}: the text itself (a block with a newline) or valueFrom: a key of a "
                "ConfigMap or Secret of the lab's namespace ({configMapKeyRef|secretKeyRef: {name, key}})",
            }
    if "binds" in props:
        props["env-files"] = {"type": "array", "items": ANY, "description": "env files: each the text or a valueFrom"}
    for child in [*props.values(), node.get("additionalProperties"), node.get("items")]:
        if isinstance(child, dict):
            _file_keys(child)


class InvalidSpec(ValueError):
    """A resource the model refuses: ``str()`` names each field (``spec.topology.nodes.h1.kind: ...``)."""

    @classmethod
    def of(cls, exc: TopologyError) -> InvalidSpec:
        """The model's problems, each at its field of the resource."""
        return cls("; ".join(f"{_field(p.path)}: {p.message}" for p in exc.problems))


def _no_fetch(kind: str, name: str, _key: str) -> bytes:
    raise LookupError(f"{kind} {name}: no cluster to read it from here")


def blueprint(obj: dict[str, Any], fetch: inputs.Fetch = _no_fetch) -> Blueprint:
    """The lab a NestLab resource asks for (:func:`read`'s, without its files)."""
    return read(obj, fetch)[0]


def read(obj: dict[str, Any], fetch: inputs.Fetch = _no_fetch) -> tuple[Blueprint, dict[str, bytes]]:
    """The lab a NestLab resource asks for, its ``spec`` checked as a topology file named ``metadata.name``, and
    the files it gives (by the path the lab's pods find each at).  Every file key's value is the text itself or
    a reference ``fetch`` reads (inputs.py); the model reads those files and no other (never the operator's disk);
    a spec over :data:`MAX_SPEC_BYTES` or a lab over :data:`MAX_NODES` nodes is refused."""
    from ..model import files
    from ..model.load import load_data

    meta = obj["metadata"]
    source = f"NestLab {meta['namespace']}/{meta['name']}"
    spec = obj.get("spec") or {}
    if (size := len(json.dumps(spec))) > MAX_SPEC_BYTES:
        raise InvalidSpec(f"spec: {size // 1024} KiB, over the {MAX_SPEC_BYTES // 1024} KiB a NestLab may hold")
    try:
        spec, given = inputs.resolve(spec, topology_spec(), fetch)
    except inputs.Refused as exc:
        raise InvalidSpec(str(exc)) from None
    data = {**spec, "name": meta["name"]}  # the resource's name is its lab's
    try:
        with files.only(given):
            loaded = load_data(data, source)
    except TopologyError as exc:
        raise InvalidSpec.of(exc) from None
    except Exception as exc:  # noqa: BLE001 - a spec the model fails on is that resource's fault, not the operator's
        raise InvalidSpec(f"spec: the model cannot read it ({type(exc).__name__})") from None  # its text may quote a file
    topology = loaded.topology
    if (count := len(topology.topology.nodes)) > MAX_NODES:
        raise InvalidSpec(f"spec.topology.nodes: {count} nodes, over the {MAX_NODES} a NestLab may have")
    return Blueprint.of(loaded), given


def _field(path: tuple[str | int, ...]) -> str:
    return "metadata.name" if path[:1] == ("name",) else f"spec.{dotted(path)}" if path else "spec"
