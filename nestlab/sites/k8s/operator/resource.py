"""The NestLab resource (``nestlab.dev/v1alpha1``): its CustomResourceDefinition, whose ``spec`` schema is the
topology's (model/openapi.py), and a resource read into the lab it asks for, once, where the operator takes it."""

from __future__ import annotations

import copy
from typing import Any

from ....model.errors import TopologyError, dotted
from ....model.openapi import topology_spec
from ....plan.blueprint import Blueprint

GROUP, VERSION, KIND, PLURAL, SHORT = "nestlab.dev", "v1alpha1", "NestLab", "nestlabs", "nl"
API_VERSION = f"{GROUP}/{VERSION}"
FINALIZER = f"{GROUP}/pods"  # held until every pod and object of the lab is gone
PHASES = ["Pending", "Deploying", "Ready", "Failed", "Deleting"]

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
    spec = topology_spec()
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


class InvalidSpec(ValueError):
    """A resource the model refuses: ``str()`` names each field (``spec.topology.nodes.h1.kind: ...``)."""

    @classmethod
    def of(cls, exc: TopologyError) -> InvalidSpec:
        """The model's problems, each at its field of the resource."""
        return cls("; ".join(f"{_field(p.path)}: {p.message}" for p in exc.problems))


def blueprint(obj: dict[str, Any]) -> Blueprint:
    """The lab a NestLab resource asks for: its ``spec`` checked as a topology file named ``metadata.name``."""
    from ....model.load import load_data

    meta = obj["metadata"]
    source = f"NestLab {meta['namespace']}/{meta['name']}"
    data = {"name": meta["name"], **copy.deepcopy(obj.get("spec") or {})}
    body: dict[str, Any] = data["topology"] if isinstance(data.get("topology"), dict) else {}
    specs = {"defaults": body.get("defaults")} | {
        f"{part}.{name}": spec
        for part in ("kinds", "groups", "nodes")
        if isinstance(body.get(part), dict)
        for name, spec in body[part].items()
    }
    if bound := [where for where, spec in specs.items() if isinstance(spec, dict) and spec.get("binds")]:
        # checked before the model looks for the files: the operator's own (its service account's token) are not a lab's
        raise InvalidSpec(f"spec.topology.{bound[0]}.binds: a resource binds no file (the operator's disk is not the lab's)")
    try:
        loaded = load_data(data, source)
    except TopologyError as exc:
        raise InvalidSpec.of(exc) from None
    topology = loaded.topology
    document = topology.model_dump(mode="json")
    return Blueprint(meta["name"], source, document, tuple(loaded.notices), loaded.located, checked=topology)


def _field(path: tuple[str | int, ...]) -> str:
    return "metadata.name" if path[:1] == ("name",) else f"spec.{dotted(path)}" if path else "spec"
