"""The NestLab resource without a cluster: its CRD's schema is the model's, structural; a resource reads into the
lab its file would be, and a bad one names its field; the operator's work queue hands a key to one worker at a time."""

from __future__ import annotations

import threading

import pytest
import yaml
from conftest import ROOT

from nestlab.model.openapi import topology_spec
from nestlab.sites.k8s.operator.queue import WorkQueue
from nestlab.sites.k8s.operator.resource import InvalidSpec, blueprint, crd

EXAMPLE = ROOT / "examples" / "nestlab-resource.yaml"


def _walk(node, path=""):
    yield path, node
    for key in ("properties", "additionalProperties"):
        for name, child in (node.get(key) or {}).items() if key == "properties" else [("*", node.get(key))]:
            if isinstance(child, dict):
                yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")


def test_the_crd_schema_is_structural_and_the_models():
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "pattern", "default", "title"} & set(node), path
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string"), path
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["topology"] and "name" not in spec["properties"] and "servers" not in spec["properties"]
    link = spec["properties"]["topology"]["properties"]["links"]["items"]["properties"]
    assert link["params"]["properties"]["rate"] == {
        "type": "string",
        "nullable": True,
        "description": "1kbit..400gbit, HTB with 64-bit rates",
    }
    assert link["params"]["properties"]["burst"]["x-kubernetes-int-or-string"]
    assert spec["properties"]["mgmt"]["properties"]["ipv4-subnet"]["type"] == "string"  # the file's spelling
    assert spec == {**topology_spec(), "description": spec["description"]}


def test_a_resource_is_its_file_indented_and_a_bad_one_names_the_field():
    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["metadata"]["namespace"] = "labs"
    lab = blueprint(resource)
    assert lab.name == "nl-demo" and sorted(lab.plan.nodes) == ["h1", "h2", "r1"]
    resource["spec"]["topology"]["links"][1]["params"]["rate"] = "fast"
    with pytest.raises(InvalidSpec, match=r"^spec\.topology\.links\[1\]\.params\.rate: 'fast' is not a rate"):
        blueprint(resource)
    del resource["spec"]["topology"]["links"][1]["params"]
    resource["spec"]["topology"]["nodes"]["h2"]["binds"] = ["/var/run/secrets:/s"]  # refused before the model looks for it
    with pytest.raises(InvalidSpec, match=r"^spec\.topology\.nodes\.h2\.binds: a resource binds no file"):
        blueprint(resource)
    del resource["spec"]["topology"]["nodes"]["h2"]["binds"]
    resource["metadata"]["name"] = "nl.demo"
    with pytest.raises(InvalidSpec, match=r"^metadata\.name: 'nl\.demo' may use only"):
        blueprint(resource)


def test_the_work_queue_gives_a_key_to_one_worker_and_again_if_it_changed_meanwhile():
    queue = WorkQueue()
    for key in ("a/x", "a/y", "a/x"):
        queue.add(key)
    first = queue.get()
    assert first == "a/x" and queue.get() == "a/y"
    queue.add("a/x")  # changed while a worker has it: not handed out now, queued when it is done
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    waiter.join(0.2)
    assert not got
    queue.done("a/x")
    waiter.join(2)
    assert got == ["a/x"]
    queue.close()
    assert queue.get() is None
