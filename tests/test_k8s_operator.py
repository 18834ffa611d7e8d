"""Labs as Kubernetes resources (make test-k8s), on a cluster as test_k8s_cluster.py's: the NestLab CRD from the
model's schema; the operator installed in the cluster making examples/nestlab-resource.yaml Ready, changing a
link's rate in place, the lab used from here with no record of it (`nestlab exec/inspect/link set --lab NAME
--kubeconfig KC`), and removing the lab's pods with it, then uninstalled; and the operator run from here
(`nestlab k8s operator run`) failing a bad lab by its field, finishing a deploy it was killed in the middle of, a lab
of the same name in another namespace, and removing a lab deleted while it was down; a hostile author's every try
past their namespace against one operator (TestAHostileAuthor); last, a lab Degraded by a lost cluster node.  The
resources are driven with kubectl, built by make k8s from the same pinned source."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import test_k8s_cluster as tier
import yaml
from conftest import NESTLAB, ROOT, leftovers, run_cli

from nestlab import names
from nestlab.operator.resource import resource_spec
from nestlab.testbeds import cluster

pytestmark = pytest.mark.k8s
kube, cluster_itself, nothing_left_behind = tier.kube, tier.cluster_itself, tier.nothing_left_behind  # the tier's cluster, checks
_kubectl = tier._kubectl
EXAMPLE = ROOT / "examples" / "nestlab-resource.yaml"


def _get(kc: str, name: str, namespace: str = "default") -> dict | None:
    got = _kubectl(kc, "get", "-n", namespace, "nestlab", name, "-o", "json")
    return json.loads(got.stdout) if got.returncode == 0 else None


def _status(kc: str, name: str, namespace: str = "default") -> dict:
    return (_get(kc, name, namespace) or {}).get("status") or {}


def _until(what: str, check, timeout: float, why=lambda: ""):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"not {what} after {timeout:.0f} s {why()}"
        time.sleep(0.5)
    return found


@contextlib.contextmanager
def _operator(kc: str, log):
    proc = subprocess.Popen([*NESTLAB, "k8s", "operator", "run", "--kubeconfig", kc], stderr=log, stdout=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def installed(kube, tmp_path):
    """The CRD and RBAC (no in-cluster operator), the operator's log; at the end no NestLab, nothing installed."""
    done = run_cli("k8s", "operator", "install", "--kubeconfig", kube, "--no-deployment", "--allow", "default")
    assert done.returncode == 0, done.stderr
    log = tmp_path / "operator.log"
    try:
        yield log
    finally:
        with open(log, "a") as fh, _operator(kube, fh):  # the operator removes what is left, pods first
            _kubectl(kube, "delete", "nestlabs", "--all", "-A", "--timeout=180s")
        gone = run_cli("k8s", "operator", "uninstall", "--kubeconfig", kube, timeout=200)
        assert gone.returncode == 0, gone.stderr + log.read_text()


def _ready(kc: str, name: str, generation: int = 1, timeout: float = 240) -> dict:
    """The NestLab once Ready for ``generation``."""

    def ready():
        lab = _get(kc, name) or {}
        status = lab.get("status", {})
        return status.get("phase") == "Ready" and status.get("observedGeneration") == generation and lab

    return _until(f"Ready at generation {generation}", ready, timeout, lambda: (_get(kc, name) or {}).get("status") or _logs(kc))


def _logs(kc: str) -> str:
    """The in-cluster operator's log, if it runs."""
    return _kubectl(kc, "logs", "-n", "nestlab-system", "deployment/nestlab-operator", "--tail=30").stdout


def _in_h1(kc: str, *command: str) -> subprocess.CompletedProcess:
    return _kubectl(kc, "exec", "nl-demo-node1", "--", "nestlab", "exec", "--lab", "nl-demo", "h1", "--", *command)


def _pods(kc: str, lab: str, namespace: str = "default") -> dict[str, str]:
    listed = json.loads(
        _kubectl(kc, "get", "pods", "-n", namespace, "-l", f"nestlab.dev/lab={lab}", "-o", "json", check=True).stdout
    )
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in listed["items"]}


def test_installed_in_the_cluster_a_nestlab_is_made_ready_changed_in_place_and_deleted_then_uninstall_leaves_nothing(kube):
    done = run_cli("k8s", "operator", "install", "--kubeconfig", kube, "--allow", "default")
    try:
        assert done.returncode == 0, done.stderr
        crd = json.loads(_kubectl(kube, "get", "crd", "nestlabs.nestlab.dev", "-o", "json", check=True).stdout)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True" and conditions.get("NonStructuralSchema") is None, crd["status"]
        served = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert served["properties"]["topology"] == resource_spec()["properties"]["topology"]
        role = json.loads(_kubectl(kube, "get", "clusterrole", "nestlab-operator", "-o", "json", check=True).stdout)
        assert not any("*" in r["verbs"] or "*" in r["resources"] for r in role["rules"]), role["rules"]
        explain = lambda: _kubectl(kube, "explain", "nestlab.spec.topology.links.params.rate").stdout  # noqa: E731
        assert "1kbit..400gbit" in _until("explained (the API publishes a new CRD's schema in a while)", explain, 60)
        bad = yaml.safe_load(EXAMPLE.read_text())
        bad["spec"]["topology"]["nodes"]["h1"]["kind"] = "router9000"
        refused = _kubectl_stdin(kube, yaml.safe_dump(bad), "apply", "-f", "-")
        assert refused.returncode != 0, "the schema refuses a kind the model has not"
        assert 'spec.topology.nodes.h1.kind: Unsupported value: "router9000"' in refused.stderr, refused.stderr

        assert _kubectl(kube, "apply", "-f", str(EXAMPLE)).returncode == 0
        lab = _ready(kube, "nl-demo")
        status = lab["status"]
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [("Ready", "True", "Deployed")], status
        assert status["nodeCount"] == 3 and status["nodes"] == {
            "h1": {
                "pod": "nl-demo-node1",
                "clusterNode": "node1",
                "state": "running",
                "addresses": {"eth1": ["10.0.4.1/30"], "eth2": ["10.0.5.1/30"]},
            },
            "r1": {"pod": "nl-demo-node1", "clusterNode": "node1", "state": "running", "addresses": {"eth1": ["10.0.4.2/30"]}},
            "h2": {"pod": "nl-demo-node2", "clusterNode": "node2", "state": "running", "addresses": {"eth1": ["10.0.5.2/30"]}},
        }, status
        assert lab["metadata"]["finalizers"] == ["nestlab.dev/pods"]
        listed = _kubectl(kube, "get", "nestlabs", check=True).stdout.splitlines()
        assert listed[0].split() == ["NAME", "PHASE", "NODES", "AGE"] and listed[1].split()[:3] == ["nl-demo", "Ready", "3"], (
            listed
        )
        ping = _in_h1(kube, "ping", "-c2", "-W2", "10.0.5.2")  # node1 to node2, across the pods' tunnel
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
        events = _kubectl(kube, "get", "events", "--field-selector", "involvedObject.name=nl-demo", "-o", "json", check=True)
        assert {"Deploying", "Ready"} <= {e["reason"] for e in json.loads(events.stdout)["items"]}

        pods = _pods(kube, "nl-demo")
        shaping = lambda: _in_h1(kube, "tc", "class", "show", "dev", "eth2").stdout  # noqa: E731
        assert "rate 40Mbit" in shaping(), shaping()
        patch = '[{"op": "replace", "path": "/spec/topology/links/1/params/rate", "value": "20mbit"}]'
        assert _kubectl(kube, "patch", "nestlab", "nl-demo", "--type=json", "-p", patch).returncode == 0
        _ready(kube, "nl-demo", generation=2, timeout=120)
        assert "rate 20Mbit" in shaping(), shaping()
        assert _pods(kube, "nl-demo") == pods, "a rate changed in place: the same pods"
        _from_a_workstation(kube)

        assert _kubectl(kube, "delete", "pod", "nl-demo-node2", "--wait=false").returncode == 0  # by hand: the lab is Degraded
        conditions = lambda: _status(kube, "nl-demo").get("conditions", [])  # noqa: E731
        lost = _until(
            "Degraded", lambda: next((c for c in conditions() if c["type"] == "Degraded" and c["status"] == "True"), None), 90
        )
        assert lost["reason"] == "PodLost" and lost["message"].startswith("pod nl-demo-node2"), lost

        deleted = _kubectl(kube, "delete", "nestlab", "nl-demo", "--timeout=120s")
        assert deleted.returncode == 0, deleted.stderr
        assert not _kubectl(
            kube, "get", "pods,configmaps,secrets,services", "-l", "nestlab.dev/lab=nl-demo", "-o", "name"
        ).stdout.strip()
    finally:
        _kubectl(kube, "delete", "nestlabs", "--all", "-A", "--timeout=120s")
        gone = run_cli("k8s", "operator", "uninstall", "--kubeconfig", kube, timeout=200)
    assert gone.returncode == 0, gone.stderr
    assert "CustomResourceDefinition/nestlabs.nestlab.dev" in gone.stderr
    for kind, name in (("crd", "nestlabs.nestlab.dev"), ("namespace", "nestlab-system"), ("clusterrole", "nestlab-operator")):
        assert _kubectl(kube, "get", kind, name).returncode != 0, f"{kind} {name} outlived uninstall"
    for kind in ("role", "rolebinding"):
        assert _kubectl(kube, "get", kind, "nestlab-operator").returncode != 0, f"{kind} of allow outlived uninstall"


def _from_a_workstation(kc: str) -> None:
    """The operator's lab used from here, which never deployed it (no record of it): found through its NestLab."""
    assert not os.path.exists(names.lab_dir("nl-demo"))
    here = ("--lab", "nl-demo", "--kubeconfig", kc)
    ping = run_cli("exec", *here, "h1", "--", "ping", "-c2", "-W2", "10.0.5.2")  # node1 to node2
    assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
    inspected = run_cli("inspect", *here, "--format", "json")
    assert inspected.returncode == 0, inspected.stderr
    nodes = {n["name"]: n["k8s_node"] for n in json.loads(inspected.stdout)["nodes"]}
    assert nodes == {"h1": "node1", "r1": "node1", "h2": "node2"}, inspected.stdout
    changed = run_cli("link", "set", *here, "h1:eth1", "r1:eth1", "--rate", "10mbit")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    shaped = _in_h1(kc, "tc", "class", "show", "dev", "eth1").stdout
    assert "rate 10Mbit" in shaped, shaped
    checked = run_cli("check", *here, "--format", "json", "--wait", "30")
    assert checked.returncode == 0 and json.loads(checked.stdout)["checks"][0]["held"], checked.stdout + checked.stderr
    logged = run_cli("events", *here, "--format", "json", "--since", "0", "--no-follow")  # every pod's log, merged
    assert logged.returncode == 0 and "10mbit" in logged.stdout, logged.stdout + logged.stderr
    unknown = run_cli("exec", "--lab", "nl-nope", "--kubeconfig", kc, "h1", "--", "true")
    assert unknown.returncode == 1 and "no NestLab nl-nope in namespace default (its NestLabs: nl-demo)" in unknown.stderr, (
        unknown.stderr
    )
    assert not os.path.exists(names.lab_dir("nl-demo")), "nothing of it is written here"


def _kubectl_stdin(kc: str, text: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [f"{cluster.BIN}/kubectl", "--kubeconfig", kc, *args], input=text, capture_output=True, text=True, timeout=60
    )


def test_run_from_here_a_bad_nestlab_fails_by_its_field_a_killed_deploy_completes_and_a_lab_deleted_meanwhile_goes(
    kube, installed
):
    with open(installed, "a") as log, _operator(kube, log) as first:
        wrong = yaml.safe_load(EXAMPLE.read_text())  # past the schema, refused by the model: an endpoint of no node
        wrong["metadata"]["name"] = "nl-wrong"
        wrong["spec"]["topology"]["links"][0]["endpoints"][1] = "r9:eth1"
        assert _kubectl_stdin(kube, yaml.safe_dump(wrong), "apply", "-f", "-").returncode == 0
        failed = _until(
            "Failed", lambda: (o := _get(kube, "nl-wrong")) and o.get("status", {}).get("phase") == "Failed" and o, 60
        )
        ready = failed["status"]["conditions"][0]
        assert ready["type"] == "Ready" and ready["status"] == "False" and ready["reason"] == "InvalidSpec", ready
        assert ready["message"].startswith("spec.topology.links[0].endpoints"), ready
        assert not _pods(kube, "nl-wrong")
        refused = run_cli("inspect", "--lab", "nl-wrong", "--kubeconfig", kube)
        assert refused.returncode == 1 and "NestLab default/nl-wrong is Failed: spec.topology.links[0]" in refused.stderr, (
            refused.stderr
        )
        pinned = yaml.safe_load(EXAMPLE.read_text())  # a pin to a node the cluster lacks: the spec's fault, nothing made
        pinned["metadata"]["name"] = "nl-nowhere"
        pinned["spec"]["topology"]["nodes"]["h2"]["server"] = "node9"
        assert _kubectl_stdin(kube, yaml.safe_dump(pinned), "apply", "-f", "-").returncode == 0
        nowhere = _until("Failed", lambda: (s := _status(kube, "nl-nowhere")).get("phase") == "Failed" and s, 60)["conditions"][0]
        assert nowhere["reason"] == "InvalidSpec" and nowhere["message"].startswith(
            "spec.topology.nodes.h2.server: server 'node9'"
        ), nowhere
        assert not _pods(kube, "nl-nowhere")
        assert _kubectl(kube, "apply", "-f", str(EXAMPLE)).returncode == 0
        _until("deploying", lambda: _status(kube, "nl-demo").get("phase") == "Deploying" and _pods(kube, "nl-demo"), 60)
        first.kill()  # mid-deploy: the pods made, the shares not deployed
    with open(installed, "a") as log, _operator(kube, log):
        assert _ready(kube, "nl-demo")["status"]["nodeCount"] == 3  # the one that returns makes the lab anew
        ping = _in_h1(kube, "ping", "-c1", "-W2", "10.0.5.2")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        _kubectl(kube, "create", "namespace", "nl-other", check=True)  # a lab of the same name in another namespace
        try:
            _until(
                "a default service account",
                lambda: _kubectl(kube, "get", "-n", "nl-other", "serviceaccount", "default").returncode == 0,
                60,
            )
            allowed = run_cli("k8s", "operator", "allow", "nl-other", "--kubeconfig", kube)
            assert allowed.returncode == 0, allowed.stderr
            assert _kubectl(kube, "apply", "-n", "nl-other", "-f", str(EXAMPLE)).returncode == 0
            _until("Ready in nl-other", lambda: _status(kube, "nl-demo", "nl-other").get("phase") == "Ready", 120)
            assert _pods(kube, "nl-demo", "nl-other").keys() == _pods(kube, "nl-demo").keys()
            assert _kubectl(kube, "delete", "nestlab", "-n", "nl-other", "nl-demo", "--timeout=120s").returncode == 0
            assert not _pods(kube, "nl-demo", "nl-other") and _status(kube, "nl-demo").get("phase") == "Ready"
        finally:
            _kubectl(kube, "delete", "namespace", "nl-other", "--timeout=120s")

    # the operator is down: a delete waits on the finalizer, the pods stay
    assert _kubectl(kube, "delete", "nestlab", "nl-demo", "--wait=false").returncode == 0
    time.sleep(2)
    assert (_get(kube, "nl-demo") or {}).get("metadata", {}).get("deletionTimestamp"), "the finalizer holds it"
    assert _pods(kube, "nl-demo")
    with open(installed, "a") as log, _operator(kube, log):
        _until("gone", lambda: _get(kube, "nl-demo") is None, 120)
        assert not _kubectl(
            kube, "get", "pods,configmaps,secrets,services", "-l", "nestlab.dev/lab=nl-demo", "-o", "name"
        ).stdout.strip()


OPERATOR = "system:serviceaccount:nestlab-system:nestlab-operator"
TENANT = "system:serviceaccount:labs:tenant"  # may write NestLabs in namespace labs, and nothing else
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
OTHER_PASSWORD = "OTHER-NAMESPACE-PASSWORD-5d1e"  # a Secret of namespace nobody, never a lab of labs'
REGISTRY_PASSWORD = "REGISTRY-PASSWORD-77c2"  # a docker-registry Secret of labs: a type no lab is given


def _as(kc: str, who: str, *args: str, text: str | None = None) -> subprocess.CompletedProcess:
    """kubectl as ``who`` (the admin impersonating it: RBAC judges ``who``)."""
    return subprocess.run(
        [f"{cluster.BIN}/kubectl", "--kubeconfig", kc, "--as", who, *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _hostile(name: str, **changes) -> str:
    """The example as ``name``, with ``changes`` (node or link -> keys) made: a NestLab of a hostile author."""
    lab = yaml.safe_load(EXAMPLE.read_text())
    lab["metadata"] |= {"name": name, "namespace": "labs"}
    body = lab["spec"]["topology"]
    for where, keys in changes.items():
        target = body if where == "topology" else body["links"][1] if where == "link" else body["nodes"][where]
        target.update(keys)
    return yaml.safe_dump(lab)


def _restarts(kc: str) -> int:
    pods = json.loads(_kubectl(kc, "get", "pods", "-n", "nestlab-system", "-o", "json", check=True).stdout)["items"]
    return sum(c["restartCount"] for p in pods for c in p["status"].get("containerStatuses") or [])


LAB_PASSWORD = "LAB-PASSWORD-PRINTED-9b4e"  # a Secret of labs that a lab of labs prints, then fails
TRICKS = (  # names of nobody's Secret, each a way another namespace's might be reached, each refused by its field
    "../../nobody/secrets/other-pass",  # dot segments, which the HTTP client removes
    "..%2F..%2Fnobody%2Fsecrets%2Fother-pass",  # a slash encoded
    "%2e%2e/%2e%2e/nobody/secrets/other-pass",  # the dots encoded
    "nobody/other-pass",
    "other-pass.",  # a trailing dot
    "Other-Pass",  # upper case
    "other\u2010pass",  # a hyphen of another script
    "\uff4f\uff54\uff48\uff45\uff52-pass",  # full-width letters, which NFKC folds to 'other'
    "other-pass\n",
    "other-pass%00",
    "a" * 254 + ".other-pass",  # very long
)


@pytest.fixture(scope="class")
def tenancy(kube, cluster_itself):
    """The operator in the cluster with namespace labs allowed (nobody not yet); an author (``TENANT``) who may write
    NestLabs in labs alone; Secrets in both.  The class's labs stay from one test to the next (one operator, each lab
    deployed once); at the end every NestLab goes, the operator is uninstalled, and no lab pod is left.  Yields the
    operator's token."""
    for namespace in ("labs", "nobody"):
        _kubectl(kube, "create", "namespace", namespace, check=True)
    try:
        for namespace in ("labs", "nobody"):  # a pod needs its namespace's default account
            _until(
                f"{namespace}'s account", lambda n=namespace: _kubectl(kube, "get", "-n", n, "sa", "default").returncode == 0, 60
            )
        done = run_cli("k8s", "operator", "install", "--kubeconfig", kube, "--allow", "labs")
        assert done.returncode == 0, done.stderr
        assert "each in a user namespace of its own" in done.stderr, "allow says what an author can then reach"
        _kubectl(kube, "create", "serviceaccount", "tenant", "-n", "labs", check=True)
        verbs = "--verb=get,list,watch,create,update,patch,delete"
        _kubectl(kube, "create", "role", "author", "-n", "labs", verbs, "--resource=nestlabs.nestlab.dev", check=True)
        _kubectl(
            kube, "create", "rolebinding", "author", "-n", "labs", "--role=author", "--serviceaccount=labs:tenant", check=True
        )
        running = lambda: "Running" in _kubectl(kube, "get", "pods", "-n", "nestlab-system", "-o", "json").stdout  # noqa: E731
        _until("the operator running", running, 120)
        token = _kubectl(kube, "exec", "-n", "nestlab-system", "deploy/nestlab-operator", "--", "cat", TOKEN, check=True).stdout
        assert len(token) > 100
        big = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"nestlab-big-{os.getpid()}.trace")
        with open(big, "w") as fh:
            fh.write("1\n" * 450_000)  # 900 KB
        try:
            _kubectl(kube, "create", "secret", "generic", "big", "-n", "labs", f"--from-file=lte.trace={big}", check=True)
        finally:
            os.unlink(big)
        _kubectl(
            kube,
            "create",
            "secret",
            "docker-registry",
            "regcred",
            "-n",
            "labs",
            "--docker-server=registry.invalid",
            "--docker-username=u",
            f"--docker-password={REGISTRY_PASSWORD}",
            check=True,
        )
        _kubectl(
            kube, "create", "secret", "generic", "other-pass", "-n", "nobody", f"--from-literal=k={OTHER_PASSWORD}", check=True
        )
        _kubectl(kube, "create", "secret", "generic", "lab-pass", "-n", "labs", f"--from-literal=pw={LAB_PASSWORD}", check=True)
        yield token
    finally:
        for namespace in ("labs", "nobody"):
            _kubectl(kube, "delete", "nestlabs", "--all", "-n", namespace, "--timeout=180s")
        gone = run_cli("k8s", "operator", "uninstall", "--kubeconfig", kube, timeout=200)
        for namespace in ("labs", "nobody"):
            _kubectl(kube, "delete", "namespace", namespace, "--timeout=120s")
    assert gone.returncode == 0, gone.stderr
    assert not _kubectl(kube, "get", "pods", "-A", "-l", "nestlab.dev/lab", "-o", "name").stdout.split()
    assert not sorted(set(leftovers()) - cluster_itself)


def _failed(kc: str, name: str) -> dict | bool:
    """The Ready condition of NestLab labs/``name`` once Failed."""
    return (s := _status(kc, name, "labs")).get("phase") == "Failed" and s["conditions"][0]


def _nobody_ready(kc: str) -> None:
    """An administrator's lab in namespace nobody, allowed: Ready (made once; the class's later tests find it)."""
    allowed = run_cli("k8s", "operator", "allow", "nobody", "--kubeconfig", kc)
    assert allowed.returncode == 0 and "each in a user namespace of its own" in allowed.stderr, allowed.stderr
    _kubectl(kc, "apply", "-n", "nobody", "-f", str(EXAMPLE), check=True)
    _until("Ready once allowed", lambda: _status(kc, "nl-demo", "nobody").get("phase") == "Ready", 240, lambda: _logs(kc))


def _nowhere(kc: str, *texts: str) -> None:
    """No text of ``texts`` in any NestLab, event or pod (its spec, its environment) of labs or nobody, nor in the
    operator's log."""
    for namespace in ("labs", "nobody"):
        everything = _kubectl(kc, "get", "nestlabs,events,pods", "-n", namespace, "-o", "json", check=True).stdout
        assert not [t for t in texts if t in everything], namespace
    log = _kubectl(kc, "logs", "-n", "nestlab-system", "deployment/nestlab-operator").stdout
    assert log and not [t for t in texts if t in log], "the operator's log"


def _reader(kc: str, tmp_path) -> str:
    """A kubeconfig of an author of labs who may also read its pods' logs (kubectl logs's rights), nothing else."""
    _kubectl(kc, "create", "serviceaccount", "reader", "-n", "labs", check=True)
    _kubectl(kc, "create", "role", "reader", "-n", "labs", "--verb=get,list", "--resource=pods,pods/log", check=True)
    _kubectl(kc, "create", "rolebinding", "reader", "-n", "labs", "--role=reader", "--serviceaccount=labs:reader", check=True)
    token = _kubectl(kc, "create", "token", "reader", "-n", "labs", check=True).stdout.strip()
    config = yaml.safe_load(Path(kc).read_text())
    config["users"] = [{"name": "reader", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "reader"
    path = tmp_path / "reader.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


class TestAHostileAuthor:
    """One operator in the cluster and two allowed namespaces for every case of an author of namespace labs trying to
    reach past it (these run in this order; each test makes what it needs if an earlier one did not)."""

    @pytest.fixture(autouse=True)
    def nothing_left_behind(self, tenancy):
        """The class's labs stay between its tests: tenancy's end checks that nothing is left."""
        yield

    def test_a_tenant_allowed_only_nestlabs_gets_no_token_cannot_stop_the_operator_and_its_good_lab_runs(self, kube, tenancy):
        """An author who may write NestLabs in labs alone tries every file key on the operator's token, a /dev/zero
        trace, a spec of megabytes; an administrator's lab in a namespace nobody allowed; then everything the author
        (and anyone) can read is searched for the operator's token."""
        token = tenancy
        files = {
            "r1": {"kind": "frr", "startup-config": TOKEN},
            "h1": {"binds": [f"{TOKEN}:/token"]},
            "h2": {"env-files": [TOKEN]},
            "link": {"params": {"trace": TOKEN}},
            "topology": {"defaults": {"credentials": {"identity-file": TOKEN}}},
        }
        for name, text in (
            ("nl-files", _hostile("nl-files", **files)),
            ("nl-zero", _hostile("nl-zero", link={"params": {"trace": "/dev/zero"}})),
            (  # /dev/zero's way through a reference: a Secret near the API's 1 MiB, refused by its size
                "nl-inline-zero",
                _hostile(
                    "nl-inline-zero",
                    link={"params": {"trace": {"valueFrom": {"secretKeyRef": {"name": "big", "key": "lte.trace"}}}}},
                ),
            ),
            (  # a registry's login: a type no lab is given
                "nl-regcred",
                _hostile(
                    "nl-regcred",
                    h2={"env-files": [{"valueFrom": {"secretKeyRef": {"name": "regcred", "key": ".dockerconfigjson"}}}]},
                ),
            ),
            ("nl-big", _hostile("nl-big", h1={"exec": ["true " + "x" * 1000] * 900})),  # ~0.9 MB: the API takes it
        ):
            applied = _as(kube, TENANT, "create", "-f", "-", text=text)  # create: apply's annotation holds 256 KiB
            assert applied.returncode == 0, (name, applied.stderr)
        huge = _as(kube, TENANT, "create", "-f", "-", text=_hostile("nl-huge", h1={"exec": ["x" * 1000] * 4000}))
        assert huge.returncode != 0, "4 MB: the API server refuses it before the operator sees it"
        assert _as(kube, TENANT, "apply", "-f", str(EXAMPLE), "-n", "labs").returncode == 0  # the author's good lab
        _kubectl(kube, "apply", "-n", "nobody", "-f", str(EXAMPLE), check=True)  # an administrator's, where nobody allowed

        refused = _until("nl-files Failed", lambda: _failed(kube, "nl-files"), 60)
        assert refused["reason"] == "InvalidSpec", refused
        for field in (
            "spec.topology.nodes.r1.startup-config",
            "spec.topology.nodes.h1.binds[0]",
            "spec.topology.nodes.h2.env-files[0]",
            "spec.topology.links[1].params.trace",
            "spec.topology.defaults.credentials.identity-file",
        ):
            assert f"{field}: " in refused["message"], (field, refused["message"])
        assert (
            "spec.topology.links[1].params.trace: '/dev/zero' would be a path"
            in _until("nl-zero Failed", lambda: _failed(kube, "nl-zero"), 60)["message"]
        )
        assert (
            "spec.topology.links[1].params.trace: over 512 KiB a file"
            in _until("nl-inline-zero Failed", lambda: _failed(kube, "nl-inline-zero"), 60)["message"]
        )
        regcred = _until("nl-regcred Failed", lambda: _failed(kube, "nl-regcred"), 60)["message"]
        assert regcred.startswith("spec.topology.nodes.h2.env-files[0].valueFrom.secretKeyRef: ") and (
            "kubernetes.io/dockerconfigjson" in regcred
        ), regcred
        assert "over the 512 KiB a NestLab may hold" in _until("nl-big Failed", lambda: _failed(kube, "nl-big"), 60)["message"]
        nobody = _until("NotAllowed", lambda: (s := _status(kube, "nl-demo", "nobody")).get("phase") == "Failed" and s, 60)
        assert nobody["conditions"][0]["reason"] == "NotAllowed" and "nestlab k8s operator allow nobody" in nobody["message"], (
            nobody
        )
        ready = _until(
            "the author's lab Ready", lambda: _status(kube, "nl-demo", "labs").get("phase") == "Ready", 240, lambda: _logs(kube)
        )
        assert ready
        ping = _kubectl(
            kube,
            "exec",
            "-n",
            "labs",
            "nl-demo-node1",
            "--",
            "nestlab",
            "exec",
            "--lab",
            "nl-demo",
            "h1",
            "--",
            "ping",
            "-c2",
            "-W2",
            "10.0.5.2",
        )
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr  # node1 to node2
        mounted = _kubectl(kube, "exec", "-n", "labs", "nl-demo-node1", "--", "stat", "-Lc", "%a %U", "/etc/nestlab/node1.yml")
        assert mounted.stdout.split() == ["400", "root"], mounted.stdout + mounted.stderr
        assert not json.loads(_kubectl(kube, "get", "pods", "-n", "nobody", "-o", "json", check=True).stdout)["items"]
        assert _restarts(kube) == 0, _logs(kube)

        for namespace, verb in (
            ("kube-system", "create pods"),
            ("kube-system", "create pods/exec"),
            ("nobody", "create pods"),
            ("nobody", "create pods/exec"),
            ("kube-system", "get secrets"),
            ("kube-system", "patch configmaps"),
            ("default", "list secrets"),
        ):
            can = _kubectl(kube, "auth", "can-i", *verb.split(), "-n", namespace, "--as", OPERATOR)
            assert can.stdout.strip() == "no", (namespace, verb, can.stdout)
        assert _kubectl(kube, "auth", "can-i", "create", "pods", "-n", "labs", "--as", OPERATOR).stdout.strip() == "yes"

        seen = _as(kube, TENANT, "get", "nestlabs", "-n", "labs", "-o", "json")
        assert seen.returncode == 0 and token not in seen.stdout
        for kind in ("configmaps", "secrets", "events", "pods"):
            assert _as(kube, TENANT, "get", kind, "-n", "labs").returncode != 0, f"the author reads no {kind}"
        for namespace in ("labs", "nobody"):  # and nobody else finds it either, in anything of a lab
            everything = _kubectl(
                kube, "get", "nestlabs,configmaps,secrets,events", "-n", namespace, "-o", "json", check=True
            ).stdout
            assert token not in everything and token[:40] not in everything, namespace
        log = _kubectl(kube, "logs", "-n", "nestlab-system", "deployment/nestlab-operator").stdout
        assert token[:40] not in log and "CANARY" not in log

        _nobody_ready(kube)  # now it is made
        assert _restarts(kube) == 0, _logs(kube)
        _nowhere(kube, REGISTRY_PASSWORD)

    def test_a_node_binding_a_file_to_a_path_the_image_lacks_is_ready_with_the_file_in_place(self, kube, tenancy):
        """A bind to a file under /etc and into a folder the pod's image lacks: the lab Ready (where a bind needs a
        root of the node's own, which pivot_root made and the runtime's seccomp refuses in a pod), the files in the
        node, nothing of them in the pod's own files."""
        binds = [
            {"path": "/etc/lab-motd", "content": "motd of the lab\n"},
            {"path": "/opt/lab/conf/app.conf", "valueFrom": {"secretKeyRef": {"name": "lab-pass", "key": "pw"}}, "mode": "ro"},
        ]
        applied = _as(kube, TENANT, "create", "-f", "-", text=_hostile("nl-bind", h1={"binds": binds}))
        assert applied.returncode == 0, applied.stderr
        _until(
            "nl-bind Ready",
            lambda: (s := _status(kube, "nl-bind", "labs")).get("phase") == "Ready" or s.get("phase") == "Failed" and s,
            240,
        )
        status = _status(kube, "nl-bind", "labs")
        assert status["phase"] == "Ready", status
        assert "sudo" not in json.dumps(status)
        h1 = ("exec", "-n", "labs", "nl-bind-node1", "--", "nestlab", "exec", "--lab", "nl-bind", "h1", "--")
        seen = _kubectl(kube, *h1, "cat", "/etc/lab-motd", "/opt/lab/conf/app.conf")
        assert seen.returncode == 0 and seen.stdout == f"motd of the lab\n{LAB_PASSWORD}", seen.stdout + seen.stderr
        assert _kubectl(kube, *h1, "sh", "-c", "echo x > /opt/lab/conf/app.conf").returncode != 0, "mode: ro"
        pod = _kubectl(kube, "exec", "-n", "labs", "nl-bind-node1", "--", "ls", "/etc/lab-motd", "/opt/lab")
        assert pod.returncode != 0 and not pod.stdout, "the pod's own files gain nothing"
        ping = _kubectl(kube, *h1, "ping", "-c1", "-W2", "10.0.5.2")  # the node's view has its network: across pods
        assert ping.returncode == 0, ping.stdout + ping.stderr

    def test_another_allowed_namespaces_secret_named_by_any_trick_fails_naming_the_field_and_is_read_nowhere(self, kube, tenancy):
        """With nobody allowed the operator may read its Secrets: an author of labs names nobody's by a path, encoded
        slashes and dots, a trailing dot, upper case, letters of other scripts, a NUL, a name too long, a
        ``namespace:`` of its own, and by a name of labs only nobody has."""
        _nobody_ready(kube)
        crossing = [{"valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}} for name in TRICKS]
        crossing += [
            {"valueFrom": {"secretKeyRef": {"name": "other-pass", "key": "k", "namespace": "nobody"}}},
            {"valueFrom": {"secretKeyRef": {"name": "other-pass", "key": "../k"}}},
            {"valueFrom": {"secretKeyRef": {"name": "other-pass", "key": "k"}}},  # labs has none of that name
            {"valueFrom": {"configMapKeyRef": {"name": "../../nobody/secrets/other-pass", "key": "k"}}},
        ]
        bad = "is not a name Kubernetes allows"
        why = [bad] * len(TRICKS) + [
            "['namespace'] not taken",
            "'../k' is not a key",
            "no Secret other-pass in namespace labs",
            bad,
        ]
        for i, ref in enumerate(crossing):  # a NestLab each: a status names its first fields in 1000 characters
            text = _hostile(f"nl-cross-{i}", h2={"env-files": [ref]})
            assert _as(kube, TENANT, "create", "-f", "-", text=text).returncode == 0, ref
        for i, ref in enumerate(crossing):
            crossed = _until(f"nl-cross-{i} Failed", lambda i=i: _failed(kube, f"nl-cross-{i}"), 60)
            kind = next(iter(ref["valueFrom"]))
            assert crossed["reason"] == "InvalidSpec", crossed
            said = crossed["message"]
            assert said.startswith(f"spec.topology.nodes.h2.env-files[0].valueFrom.{kind}: ") and why[i] in said, (ref, said)
            assert not _pods(kube, f"nl-cross-{i}", "labs")
        _nowhere(kube, OTHER_PASSWORD)
        assert _restarts(kube) == 0, _logs(kube)

    def test_a_lab_printing_its_secret_then_failing_quotes_none_of_it_and_its_author_reads_it_with_k8s_logs(
        self, kube, tenancy, tmp_path
    ):
        """A node's exec: prints a Secret the lab was given, then its healthcheck prints it again and fails (so its
        share's deploy fails with the Secret in its last lines): the NestLab Failed naming the share, its pod and exit
        code; no text of the Secret in its status, conditions, events or the operator's log.  An author who may read
        labs' pod logs reads it with `nestlab k8s logs`; another namespace's pods' logs are refused them."""
        _nobody_ready(kube)
        h1 = {
            "binds": [{"path": "/etc/lab-pass", "valueFrom": {"secretKeyRef": {"name": "lab-pass", "key": "pw"}}}],
            "exec": ["cat /etc/lab-pass"],
            "healthcheck": {"test": ["CMD-SHELL", "cat /etc/lab-pass; exit 1"], "retries": 1},
        }
        applied = _as(kube, TENANT, "create", "-f", "-", text=_hostile("nl-leak", h1=h1))
        assert applied.returncode == 0, applied.stderr
        failed = _until("nl-leak Failed", lambda: _failed(kube, "nl-leak"), 240, lambda: _logs(kube))
        assert failed["reason"] == "DeployFailed", failed
        assert failed["message"].startswith("share node1 (pod nl-leak-node1): its deploy failed (exit 1)"), failed
        assert "nestlab k8s logs nl-leak -n labs" in failed["message"], failed
        _nowhere(kube, LAB_PASSWORD, LAB_PASSWORD[:12], "not healthy")

        reader = _reader(kube, tmp_path)
        logs = run_cli("k8s", "logs", "nl-leak", "-n", "labs", "--kubeconfig", reader)
        assert logs.returncode == 0, logs.stderr
        assert "==> pod nl-leak-node1 <==" in logs.stdout and "==> pod nl-leak-node2 <==" in logs.stdout, logs.stdout
        assert LAB_PASSWORD in logs.stdout and "not healthy" in logs.stdout, logs.stdout
        assert _pods(kube, "nl-demo", "nobody"), "nobody has pods to read"
        other = run_cli("k8s", "logs", "nl-demo", "-n", "nobody", "--kubeconfig", reader)
        assert other.returncode == 1 and "Traceback" not in other.stderr, other.stderr
        assert "RBAC denied it in namespace nobody" in other.stderr and "==> pod" not in other.stdout, other.stdout + other.stderr
        assert _restarts(kube) == 0, _logs(kube)
        assert _kubectl(kube, "delete", "nestlab", "-n", "labs", "nl-leak", "--timeout=120s").returncode == 0
        assert not _pods(kube, "nl-leak", "labs"), "a failed lab's pods go with it"

    def test_a_pod_printing_a_gigabyte_to_inspect_leaves_the_operator_running_and_another_namespaces_lab_ready(
        self, kube, tenancy
    ):
        """A node's exec: puts, first on the pod's PATH, a `nestlab` whose `inspect` prints 1 GB (root in a lab pod
        decides what the operator's exec of it reads): the operator (512 MiB at most) keeps 4 MiB of it and goes on;
        its restart count stays 0, the lab is Ready without that pod's addresses, nobody's lab stays Ready."""
        _nobody_ready(kube)
        flood = (
            "printf '%s\\n' '#!/bin/sh' 'case \"$1\" in inspect) yes nestlab-floods-the-operator | head -c 1000000000;"
            " exit 0;; esac' 'exec /usr/local/bin/nestlab \"$@\"' > /usr/local/sbin/nestlab && chmod 755 /usr/local/sbin/nestlab"
        )
        applied = _as(kube, TENANT, "create", "-f", "-", text=_hostile("nl-flood", h1={"exec": [flood]}))
        assert applied.returncode == 0, applied.stderr
        ready = lambda: (s := _status(kube, "nl-flood", "labs")).get("phase") == "Ready" and s  # noqa: E731
        _until("nl-flood Ready, or the operator restarted", lambda: ready() or _restarts(kube), 240, lambda: _logs(kube))
        assert _restarts(kube) == 0, _logs(kube)
        status = ready()
        assert status, _status(kube, "nl-flood", "labs")
        planted = _kubectl(kube, "exec", "-n", "labs", "nl-flood-node1", "--", "sh", "-c", "nestlab inspect | head -c 27")
        assert planted.stdout == "nestlab-floods-the-operator", "the pod's inspect printed the flood " + planted.stderr
        assert status["nodes"]["h1"]["addresses"] == {} and status["nodes"]["h2"]["addresses"], status["nodes"]
        log = _kubectl(kube, "logs", "-n", "nestlab-system", "deployment/nestlab-operator").stdout
        assert "nestlab-floods" not in log
        assert _restarts(kube) == 0, _logs(kube)
        assert _status(kube, "nl-demo", "nobody").get("phase") == "Ready"


def test_z_a_lost_cluster_node_degrades_the_lab_its_other_pod_stays_and_delete_still_removes_everything(kube, installed):
    """Last: node2 stays dead (as test_k8s_cluster.py's test_z does with node3)."""
    with open(installed, "a") as log, _operator(kube, log):
        assert _kubectl(kube, "apply", "-f", str(EXAMPLE)).returncode == 0
        _ready(kube, "nl-demo")
        pods = _pods(kube, "nl-demo")
        cluster._kill_below(f"{names.cgroup_name(tier.NAME)}/node2")  # its kubelet, containerd and pods, as a crash would
        conditions = lambda: _status(kube, "nl-demo").get("conditions", [])  # noqa: E731
        lost = _until(
            "Degraded", lambda: next((c for c in conditions() if c["type"] == "Degraded" and c["status"] == "True"), None), 120
        )
        assert lost["reason"] == "PodLost" and lost["message"] == "pod nl-demo-node2: node node2 not Ready", lost
        status = _status(kube, "nl-demo")
        assert status["phase"] == "Ready" and status["nodes"]["h1"]["state"] == "running", status
        assert _pods(kube, "nl-demo")["nl-demo-node1"] == pods["nl-demo-node1"], "the lab's other pod stays"
        assert _kubectl(kube, "delete", "nestlab", "nl-demo", "--timeout=120s").returncode == 0
        assert not _pods(kube, "nl-demo")
