"""The NestLab resource without a cluster: its CRD's schema is the model's, structural; a resource reads into the
lab its file would be, and a bad one names its field; the operator's work queue hands a key to one worker at a time."""

from __future__ import annotations

import base64
import sys
import threading
import time

import pytest
import yaml
from conftest import ROOT

from nestlab.model.openapi import ANY, topology_spec
from nestlab.operator.inputs import FILE_KEYS
from nestlab.operator.queue import WorkQueue
from nestlab.operator.resource import InvalidSpec, blueprint, crd, resource_spec

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
    assert spec == {**resource_spec(), "description": spec["description"]}
    node = spec["properties"]["topology"]["properties"]["nodes"]["additionalProperties"]["properties"]
    assert node["startup-config"]["x-kubernetes-preserve-unknown-fields"] and node["binds"]["items"] == ANY, "text or valueFrom"
    plain = topology_spec()["properties"]["topology"]["properties"]["nodes"]["additionalProperties"]["properties"]
    assert _without_files(node) == _without_files(plain)  # only file keys differ, at any depth (a medium's mobility trace)


def _without_files(schema):
    """``schema`` without the file keys' schemas, wherever they stand."""
    if isinstance(schema, dict):
        return {k: _without_files(v) for k, v in schema.items() if k not in FILE_KEYS}
    if isinstance(schema, list):
        return [_without_files(v) for v in schema]
    return schema


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
    with pytest.raises(
        InvalidSpec, match=r"^spec\.topology\.nodes\.h2\.binds\[0\]: '/var/run/secrets:/s': a resource binds no file"
    ):
        blueprint(resource)
    del resource["spec"]["topology"]["nodes"]["h2"]["binds"]
    resource["metadata"]["name"] = "nl.demo"
    with pytest.raises(InvalidSpec, match=r"^metadata\.name: 'nl\.demo' may use only"):
        blueprint(resource)


def test_the_work_queue_gives_a_key_to_one_worker_and_again_if_it_changed_meanwhile():
    queue = WorkQueue(per_namespace=10)  # one namespace here: its limit is another test's
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
    for seconds in (0.3, 0.2, 5):  # one wait per key, the soonest: looks never multiply
        queue.add_after("a/z", seconds)
    assert queue._due == {"a/z": pytest.approx(time.monotonic() + 0.2, abs=0.05)}
    time.sleep(0.4)
    assert queue.get() == "a/z" and not queue._due
    queue.done("a/z")
    queue.close()
    assert queue.get() is None


# -- a resource names no file of the operator's ---------------------------------------------------------------
_NAMES = {"nodes": "h1", "kinds": "linux", "groups": "g1", "components": "c1"}  # a name where the schema takes any


def _positions(schema, path=()):
    """Each field of ``schema`` (a topology's, structural) that takes a string, as a path through it: a property's
    name, "*" for a name of the author's, [] for a list's item."""
    if schema.get("type") == "string" or schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        yield path
    for name, child in (schema.get("properties") or {}).items():
        yield from _positions(child, (*path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _positions(schema["additionalProperties"], (*path, "*"))
    if isinstance(schema.get("items"), dict):
        yield from _positions(schema["items"], (*path, "[]"))


def _resource_with(path, value):
    """The example resource with ``value`` at ``path`` (a _positions path), and that field's path."""
    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["metadata"]["namespace"] = "labs"
    parent, where = resource["spec"], []
    for i, step in enumerate(path):
        if step == "[]":
            parent.extend([None] * (not parent))
            key = 0
        else:
            key = _NAMES.get(str(where[-1]) if where else "", "x") if step == "*" else step
        where.append(key)
        if i == len(path) - 1:
            parent[key] = value
            break
        fresh = [] if path[i + 1] == "[]" else {}
        if not isinstance(parent[key] if isinstance(parent, list) else parent.get(key), type(fresh)):
            parent[key] = fresh
        parent = parent[key]
    return resource, "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where).lstrip(".")


@pytest.fixture
def canary(tmp_path):
    """A file standing for the operator's token, and every open of it (Python's audit events) while the test runs."""
    secret = tmp_path / "serviceaccount" / "token"
    secret.parent.mkdir()
    secret.write_text("CANARY-TOKEN-7f3a\n")
    opened: list[str] = []
    watching = [True]

    def hook(event, args):
        if watching[0] and event in ("open", "os.listdir", "os.scandir") and args and str(args[0]).startswith(str(secret.parent)):
            opened.append(f"{event} {args[0]}")

    sys.addaudithook(hook)  # for the process: it stops looking when the test ends
    try:
        yield secret, opened
    finally:
        watching[0] = False


def test_every_file_key_is_refused_as_a_path_in_a_resource_naming_its_field(canary):
    secret, opened = canary
    keys = sorted(
        {
            p[: max(i for i, s in enumerate(p) if s in FILE_KEYS) + 1]
            for p in _positions(topology_spec())
            if set(p) & set(FILE_KEYS)
        }
    )
    assert {p[-1] for p in keys} == {"startup-config", "binds", "trace", "graph", "identity-file"}, keys
    keys += [("topology", "nodes", "*", "env-files", "[]"), ("topology", "nodes", "*", "license")]  # containerlab's, read too
    for path in keys:
        resource, field = _resource_with(path, str(secret))
        if path[-1] == "binds":
            resource, field = _resource_with(path, [f"{secret}:/token"])
            field += "[0]"
        with pytest.raises(InvalidSpec) as refused:
            blueprint(resource)
        assert f"spec.{field}: " in str(refused.value), (path, str(refused.value))
    assert not opened, opened


def test_no_field_of_a_resource_makes_the_operator_open_a_file(canary):
    """Every field the schema has, set to the path of the operator's token in turn: the model never opens it, and
    neither the lab nor a refusal holds its content.  A key added later that reads a file fails this."""
    secret, opened = canary
    tried = 0
    for path in _positions(resource_spec()):
        for value in (str(secret), f"{secret}:/etc/token"):
            resource, field = _resource_with(path, value)
            tried += 1
            try:
                said = repr(blueprint(resource).document)
            except InvalidSpec as exc:
                said = str(exc)
            assert not opened, f"spec.{field}: {opened}"
            assert "CANARY-TOKEN" not in said, field
    assert tried > 300, tried


def test_a_resource_gives_files_as_text_or_a_reference_of_its_namespace_and_they_go_in_its_secret():
    from nestlab.operator.resource import read
    from nestlab.sites.k8s.manifests import render

    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["metadata"]["namespace"] = "labs"
    nodes = resource["spec"]["topology"]["nodes"]
    nodes["r1"] |= {"kind": "frr", "startup-config": {"valueFrom": {"secretKeyRef": {"name": "r1", "key": "frr.conf"}}}}
    nodes["h1"]["binds"] = [{"path": "/etc/motd", "content": "hello\n", "mode": "ro"}]
    nodes["h2"]["env-files"] = ["GREETING=hi\n"]
    resource["spec"]["topology"]["links"][1]["params"] = {
        "trace": {"valueFrom": {"configMapKeyRef": {"name": "traces", "key": "flat"}}}
    }
    asked = []

    def fetch(kind, name, key):
        asked.append((kind, name, key))
        return {"frr.conf": b"hostname r1-from-secret\n", "flat": b"0\n1\n2\n"}[key]

    lab, given = read(resource, fetch)
    assert asked == [("Secret", "r1", "frr.conf"), ("ConfigMap", "traces", "flat")]
    body = lab.document["topology"]
    assert body["nodes"]["r1"]["startup_config"] == "hostname r1-from-secret\n" and body["nodes"]["h2"]["env"] == {
        "GREETING": "hi"
    }
    trace = body["links"][1]["params"]["trace"]
    assert trace.startswith("/etc/nestlab/files/") and given[trace] == b"0\n1\n2\n"
    from nestlab.model import files

    with files.only(given):
        manifests, _parts = render(lab, 2, "nestlab:test", "labs", {"node1", "node2"})
    secret, pods = manifests[0], manifests[2:]
    shipped = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert secret["kind"] == "Secret" and "hello\n" in shipped.values() and "0\n1\n2\n" in shipped.values()
    assert any("hostname r1-from-secret" in text for text in shipped.values())
    volume = pods[0]["spec"]["volumes"][0]["secret"]
    assert (
        volume["defaultMode"] == 0o400
        and {"key": next(k for k, v in shipped.items() if v == "0\n1\n2\n"), "path": trace.removeprefix("/etc/nestlab/")}
        in volume["items"]
    )

    def missing(kind, name, key):
        raise LookupError(f"no {kind} {name} in namespace labs")

    with pytest.raises(
        InvalidSpec, match=r"spec\.topology\.nodes\.r1\.startup-config\.valueFrom\.secretKeyRef: no Secret r1 in namespace labs"
    ):
        read(resource, missing)
    bad = lambda kind, name, key: b"7\nSECRET-LINE\n"  # noqa: E731 - a trace that is not one: its lines never echoed
    resource["spec"]["topology"]["links"][1]["params"] = {"trace": {"valueFrom": {"secretKeyRef": {"name": "t", "key": "t"}}}}
    del nodes["r1"]["startup-config"]
    with pytest.raises(InvalidSpec, match=r"spec\.topology\.links\[1\]\.params\.trace: trace .* line 2 is not a time") as refused:
        read(resource, bad)
    assert "SECRET-LINE" not in str(refused.value)


def test_a_spec_too_large_a_lab_too_many_nodes_and_a_value_too_large_are_refused():
    from nestlab.operator import resource as module

    big = yaml.safe_load(EXAMPLE.read_text())
    big["metadata"]["namespace"] = "labs"
    big["spec"]["topology"]["nodes"] |= {f"n{i}": {"exec": ["x" * 1000]} for i in range(600)}
    with pytest.raises(InvalidSpec, match=r"^spec: \d+ KiB, over the 512 KiB"):
        blueprint(big)
    many = yaml.safe_load(EXAMPLE.read_text())
    many["metadata"]["namespace"] = "labs"
    many["spec"]["topology"]["nodes"] |= {f"n{i}": {} for i in range(module.MAX_NODES)}
    with pytest.raises(InvalidSpec, match=rf"^spec\.topology\.nodes: {module.MAX_NODES + 3} nodes, over the {module.MAX_NODES}"):
        blueprint(many)
    huge = yaml.safe_load(EXAMPLE.read_text())
    huge["metadata"]["namespace"] = "labs"
    huge["spec"]["topology"]["links"][1]["params"] = {"trace": {"valueFrom": {"configMapKeyRef": {"name": "t", "key": "t"}}}}
    with pytest.raises(InvalidSpec, match=r"params\.trace: over 512 KiB a file"):
        blueprint(huge, lambda kind, name, key: b"1\n" * 300_000)


def test_the_model_reads_regular_files_alone_and_bounded(tmp_path):
    import os
    import time

    from nestlab.model import files, trace

    started = time.monotonic()
    for path in ("/dev/zero", "/dev/urandom", str(tmp_path)):
        with pytest.raises(OSError, match="not a regular file"):
            files.read_bytes(path)
        with pytest.raises(OSError):
            trace.read(path)
    os.mkfifo(tmp_path / "fifo")  # no writer: a plain open would wait for one
    with pytest.raises(OSError, match="not a regular file \\(a FIFO\\)"):
        files.read_bytes(tmp_path / "fifo")
    reader, writer = os.pipe()  # a topology on standard input, as a server's deploy reads it: a pipe, with stream
    os.write(writer, b"name: x\n")
    os.close(writer)
    assert files.read_bytes(f"/proc/self/fd/{reader}", stream=True) == b"name: x\n"
    os.close(reader)
    with pytest.raises(OSError, match="not a regular file"):
        files.read_bytes("/dev/zero", stream=True)
    (tmp_path / "big").write_bytes(b"1\n" * 1000)
    with pytest.raises(OSError, match="larger than 100 bytes"):
        files.read_bytes(tmp_path / "big", 100)
    assert time.monotonic() - started < 2
    with files.only({"/given/t": b"0\n5\n"}):
        assert trace.read("/given/t") == [0, 5] and not files.exists(tmp_path / "big")
        with pytest.raises(OSError, match="not a file of the resource"):
            trace.read(str(tmp_path / "big"))


def test_the_operator_may_make_pods_only_where_allowed_and_reads_no_secret_cluster_wide():
    from nestlab.operator.install import NAME, binding, objects, role
    from nestlab.operator.policy import Policy

    made = {o["kind"]: o for o in objects("nestlab-system", "img", policy=Policy(node_selector=("nestlab.dev/labs=yes",)))}
    cluster_wide = made["ClusterRole"]["rules"]
    reach = {(r, v) for rule in cluster_wide for r in rule["resources"] for v in rule["verbs"]}
    assert not {r for r, _v in reach} & {"pods", "pods/exec", "configmaps", "secrets", "services", "serviceaccounts"}, reach
    (bindings,) = [r for r in cluster_wide if r["resources"] == ["rolebindings"]]
    assert bindings == {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["rolebindings"],
        "verbs": ["get"],
        "resourceNames": [NAME],
    }
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in cluster_wide)
    command = made["Deployment"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-4:] == ["--node-selector", "nestlab.dev/labs=yes", "--labs-per-namespace", "2"]
    here = role("labs")
    assert here["kind"] == "Role" and here["metadata"]["namespace"] == "labs"
    assert {r for rule in here["rules"] for r in rule["resources"]} == {"pods", "pods/exec", "configmaps", "secrets", "services"}
    assert binding("labs", "nestlab-system")["subjects"] == [
        {"kind": "ServiceAccount", "name": NAME, "namespace": "nestlab-system"}
    ]


# -- a NestLab's names, Secrets, output and turns (issue: tenancy, round 3) -------------------------------------------
class _FakeAPI:
    """An API server on loopback that records every path asked and answers each GET of a Secret or ConfigMap with one
    (``types``: a Secret's type by its name), so the real client and fetcher run against it."""

    def __init__(self, tmp_path, types=None):
        import http.server
        import json

        asked = self.asked = []
        types = types or {}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                asked.append(self.path)
                parts = self.path.split("?")[0].split("/")
                kind = "Secret" if "secrets" in parts else "ConfigMap"
                name = parts[-1]
                data = {
                    "k": base64.b64encode(f"A=VALUE-OF-{parts[4]}-{name}\n".encode()).decode() if kind == "Secret" else "A=v\n"
                }
                body = json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": kind,
                        "metadata": {"name": name},
                        "type": types.get(name, "Opaque"),
                        "data": data,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.kubeconfig = tmp_path / "kubeconfig"
        server = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "labs"}}],
                    "current-context": "x",
                }
            )
        )

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api(tmp_path):
    fake = _FakeAPI(tmp_path, {"regcred": "kubernetes.io/dockerconfigjson", "tls": "kubernetes.io/tls"})
    yield fake
    fake.close()


def _referring(name: str, key: str = "k", kind: str = "secretKeyRef"):
    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["metadata"]["namespace"] = "labs"
    resource["spec"]["topology"]["nodes"]["h2"]["env-files"] = [{"valueFrom": {kind: {"name": name, "key": key}}}]
    return resource


def test_a_reference_reads_its_own_namespace_by_a_name_kubernetes_allows_never_another(api):
    from nestlab.backends.remote.kube import Cluster
    from nestlab.operator.inputs import fetcher
    from nestlab.operator.resource import read

    kube = Cluster(str(api.kubeconfig), "labs")
    lab, _given = read(_referring("app-pass"), fetcher(kube))
    assert lab.document["topology"]["nodes"]["h2"]["env"] == {"A": "VALUE-OF-labs-app-pass"}
    assert api.asked == ["/api/v1/namespaces/labs/secrets/app-pass"], api.asked  # the lab's namespace, by the fetcher
    read(_referring("app", kind="configMapKeyRef"), fetcher(kube))
    assert api.asked[-1] == "/api/v1/namespaces/labs/configmaps/app"
    api.asked.clear()
    for name, key in (
        ("../../other/secrets/pw", "k"),
        ("..%2F..%2Fother%2Fsecrets%2Fpw", "k"),
        ("../other", "k"),
        ("..", "k"),
        ("pw/../../../other/secrets/pw", "k"),
        ("Pw", "k"),
        ("pw", "../k"),
        ("pw", "a/b"),
        ("pw", ".."),
        ("x" * 254, "k"),
        ("pw.", "k"),  # a trailing dot
        ("pw\n", "k"),
        ("p\u0461w", "k"),  # a letter of another script
        ("\uff50\uff57", "k"),  # full-width 'pw', which NFKC folds to it
        ("pw%00", "k"),
    ):
        with pytest.raises(InvalidSpec) as refused:
            read(_referring(name, key), fetcher(kube))
        assert "spec.topology.nodes.h2.env-files[0].valueFrom.secretKeyRef: " in str(refused.value), (name, key)
        assert "is not a" in str(refused.value) and "VALUE-OF" not in str(refused.value), str(refused.value)
    other = _referring("pw")  # a namespace of its own choosing beside a good name: refused, not ignored
    other["spec"]["topology"]["nodes"]["h2"]["env-files"][0]["valueFrom"]["secretKeyRef"]["namespace"] = "other"
    with pytest.raises(InvalidSpec) as refused:
        read(other, fetcher(kube))
    assert "spec.topology.nodes.h2.env-files[0].valueFrom.secretKeyRef: ['namespace'] not taken" in str(refused.value)
    assert not api.asked, f"a name Kubernetes does not allow reached the API: {api.asked}"


def test_a_secret_of_a_type_no_lab_is_given_is_refused_unless_the_administrator_allows_the_type(api):
    from nestlab.backends.remote.kube import Cluster
    from nestlab.operator.inputs import WITHHELD, fetcher
    from nestlab.operator.resource import read

    assert WITHHELD == {
        "kubernetes.io/service-account-token",
        "kubernetes.io/dockerconfigjson",
        "kubernetes.io/dockercfg",
        "kubernetes.io/tls",
        "bootstrap.kubernetes.io/token",
    }
    kube = Cluster(str(api.kubeconfig), "labs")
    for name, kind in (("regcred", "kubernetes.io/dockerconfigjson"), ("tls", "kubernetes.io/tls")):
        with pytest.raises(InvalidSpec) as refused:
            read(_referring(name), fetcher(kube))
        said = str(refused.value)
        assert said.startswith("spec.topology.nodes.h2.env-files[0].valueFrom.secretKeyRef: ") and kind in said, said
        assert "VALUE-OF" not in said
    lab, _given = read(_referring("regcred"), fetcher(kube, ("kubernetes.io/dockerconfigjson",)))
    assert lab.document["topology"]["nodes"]["h2"]["env"] == {"A": "VALUE-OF-labs-regcred"}
    with pytest.raises(InvalidSpec, match="kubernetes.io/tls"):
        read(_referring("tls"), fetcher(kube, ("kubernetes.io/dockerconfigjson",)))


def test_a_failed_share_or_reconcile_is_named_in_the_status_never_quoted():
    from nestlab.operator import loop
    from nestlab.sites.k8s import rollout

    pods = {"node1": "nl-demo-node1", "node2": "nl-demo-node2"}
    answers = {"node1": (0, "", ""), "node2": (3, "", "deploying...\nPASSWORD=SECRET-LINE-1\nSECRET-LINE-2\n")}
    with pytest.raises(rollout.ShareFailed) as failed:
        rollout._each_deployed("labs", answers, pods)
    said = str(failed.value)
    assert "SECRET-LINE" not in said, said
    assert said.startswith("share node2 (pod nl-demo-node2): its deploy failed (exit 3)"), said
    assert "kubectl logs -n labs nl-demo-node2" in said and "nestlab k8s logs nl-demo -n labs" in said, said
    assert failed.value.lines[-1] == "SECRET-LINE-2", "for k8s deploy's own user, never a status"

    class Raising:
        statuses: list[str] = []

        def reconcile(self, namespace, name):
            raise RuntimeError("could not parse 'PASSWORD=SECRET-LINE-3'")

        def failed(self, namespace, name, message):
            self.statuses.append(message)

    queue = WorkQueue()
    queue.add("labs/nl-demo")
    said_in_log: list[str] = []
    worker = threading.Thread(target=loop._work, args=(queue, Raising(), said_in_log.append, {}))
    worker.start()
    time.sleep(0.3)
    queue.close()
    worker.join(5)
    assert Raising.statuses and "RuntimeError" in Raising.statuses[0], Raising.statuses
    assert not any("SECRET-LINE" in s for s in Raising.statuses), Raising.statuses


def test_only_addresses_of_the_labs_nodes_go_from_a_pods_output_to_the_status():
    import json

    from nestlab.operator.reconcile import _addresses

    printed = {
        "nodes": [
            {
                "name": "h1",
                "interfaces": [{"name": "eth1", "addresses": ["10.0.4.1/30"]}, {"name": "lo", "addresses": ["127.0.0.1/8"]}],
            },
            {"name": "SECRET-NODE", "interfaces": [{"name": "eth1", "addresses": ["10.0.0.1/24"]}]},
            {"name": "h2", "interfaces": [{"name": "eth1", "addresses": ["PASSWORD=SECRET-LINE"]}]},
        ]
    }

    class Kube:
        def exec(self, pod, command, timeout):
            return 0, json.dumps(printed), ""

    assert _addresses(Kube(), "nl-demo", {"nl-demo-node1"}, {"h1", "h2"}) == {"h1": {"eth1": ["10.0.4.1/30"]}}


def test_the_work_queue_takes_namespaces_in_turn_and_holds_each_to_its_limit():
    queue = WorkQueue(per_namespace=2)
    for i in range(1, 6):
        queue.add(f"busy/lab{i}")  # one namespace's many labs, first
    queue.add("quiet/lab1")
    queue.add("other/lab1")
    assert [queue.get() for _ in range(4)] == ["busy/lab1", "quiet/lab1", "other/lab1", "busy/lab2"]
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    waiter.join(0.3)
    assert not got, "busy has 2 labs in progress, its limit: its third waits"
    queue.add("quiet/lab2")
    waiter.join(2)
    assert got == ["quiet/lab2"], got
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    waiter.join(0.3)
    assert len(got) == 1
    queue.done("busy/lab1")
    waiter.join(2)
    assert got[-1] == "busy/lab3", got
    queue.close()


def _fake_cluster(tmp_path):
    from nestlab.backends.remote.kube import Cluster

    api = _FakeAPI(tmp_path)
    api.close()  # no request reaches it: the exec stream is replaced
    return Cluster(str(api.kubeconfig), "labs", timeout=20)


class _Flood:
    """An exec's stream whose pod prints without end (as root in a lab pod may, to `nestlab inspect`)."""

    chunk = b"x" * (1 << 20)

    def __init__(self):
        self.sent = 0
        self.returncode = 0

    def is_open(self):
        return self.sent < 1 << 34  # 16 GiB: never reached with a bound

    def update(self, timeout=0):
        pass

    def peek_stdout(self):
        return True

    def read_stdout(self, timeout=0):
        self.sent += len(self.chunk)
        return self.chunk.decode()

    def peek_stderr(self):
        return False

    def close(self):
        pass


def test_an_exec_keeps_a_bounded_output_however_much_a_pod_prints(tmp_path):
    from nestlab.backends.remote.kube import MAX_OUTPUT, ClusterError

    kube = _fake_cluster(tmp_path)
    flood = _Flood()
    kube._stream = lambda *args, **kwargs: flood
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"exec in pod p1: more than \d+ KiB of output"):
        kube.exec("p1", ["nestlab", "inspect"], timeout=10)
    assert flood.sent <= MAX_OUTPUT + len(_Flood.chunk) and time.monotonic() - started < 5, flood.sent


def test_a_shares_topology_goes_to_its_pod_on_standard_input_never_in_the_arguments():
    from nestlab.sites.k8s import rollout

    topology = "name: x\ntopology:\n  nodes:\n    h1: {env: {PASSWORD: SECRET-IN-ARGV}}\n"
    ran = []

    class Kube:
        namespace = "labs"

        def exec(self, pod, command, timeout, stdin=None):
            ran.append((command, stdin.read() if stdin else b""))
            return 0, "", ""

    rollout.redeploy_shares(Kube(), {"node1": "nl-node1"}, {"node1": topology}, time.monotonic() + 30)
    rollout.deploy_shares(Kube(), {"node1": "nl-node1"}, {"node1": "10.1.0.1"}, time.monotonic() + 30)
    (command, given), (peers_command, peers) = ran
    assert "SECRET-IN-ARGV" not in " ".join(command) and given == topology.encode(), command
    assert command[-1] == str(len(topology.encode())) and "umask 277" in command[2], command
    assert peers == b"NESTLAB_PEER_NODE1=10.1.0.1\n" and "10.1.0.1" not in " ".join(peers_command)
