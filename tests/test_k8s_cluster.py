"""Labs on a real Kubernetes cluster built from source on this machine (make test-k8s).

One cluster of three nodes serves the module: `nestlab k8s cluster up`, then labs deployed, used,
broken and destroyed on it, then `cluster down` and a check that nothing of it is left.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import pytest
import yaml
from conftest import NESTLAB, ROOT, leftovers, processes, run_cli

from nestlab import names
from nestlab.backends.remote import pki
from nestlab.engine import state
from nestlab.testbeds import cluster, kubelets

pytestmark = pytest.mark.k8s
NAME = "k8sci"  # the cluster's lab
NODES = 3


def _cluster_objects() -> list[str]:
    """What of the cluster itself is on this machine: cgroups in any hierarchy, its folder, its processes."""
    found = [
        f"cgroup {point}/{names.cgroup_name(NAME)}"
        for point, _k, _o in kubelets.cgroup_mounts()
        if os.path.isdir(os.path.join(point, names.cgroup_name(NAME)))
    ]
    found += [f"folder {names.lab_dir(NAME)}"] if os.path.isdir(names.lab_dir(NAME)) else []
    found += [
        f"process {pid} ({cmd[:80]})"
        for pid, cmd in processes()
        if re.search(
            r"(^|/)(kubelet|kube-apiserver|kube-controller-manager|kube-scheduler|etcd|containerd)( |$)", cmd.split(" ")[0]
        )
        or f"/nestlab.{NAME}" in cmd
    ]
    return found


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    """A 3-node cluster for the module; down (and checked empty) at the end."""
    if missing := cluster._missing():
        pytest.fail(f"the k8s tier needs {', '.join(missing)}: make test-k8s builds and installs them")
    kubeconfig = str(tmp_path_factory.mktemp("k8s") / "kubeconfig")
    up = run_cli("k8s", "cluster", "up", "--nodes", str(NODES), "--kubeconfig", kubeconfig, "--name", NAME, timeout=900)
    try:
        assert up.returncode == 0, up.stderr
        yield kubeconfig
    finally:
        down = run_cli("k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", NAME, timeout=300)
        assert down.returncode == 0, down.stderr
    assert not os.path.exists(kubeconfig), "cluster down leaves the kubeconfig it wrote"
    assert not _cluster_objects(), _cluster_objects()
    with open("/proc/self/mountinfo") as fh:
        assert not [line for line in fh if f"/{NAME}/" in line], "a mount of the cluster outlived it"


@pytest.fixture(scope="module")
def cluster_itself(kube) -> set[str]:
    """What the running cluster itself shows of ours (its lab, its processes), to tell from a test's leftovers."""
    return set(leftovers())


@pytest.fixture(autouse=True)
def nothing_left_behind(kube, cluster_itself):
    """Every test leaves nothing but the cluster itself: no lab of its own here, no pod of a lab in the cluster."""
    yield
    left = sorted(set(leftovers()) - cluster_itself)
    pods = _kubectl(kube, "get", "pods", "-A", "-l", "nestlab.dev/lab", "-o", "name").stdout.split()
    for lab in set(state.labs()) - {NAME}:
        run_cli("destroy", "--lab", lab)
    assert not left and not pods, f"left behind: {left} {pods}"


def _kubectl(kubeconfig: str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.path.join(cluster.BIN, "kubectl"), "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


EXAMPLE = ROOT / "examples" / "k8s.yml"  # nodes on node1..node3, a bridge on node1, a shaped link cut between node2 and node3
LAB = EXAMPLE.read_text()


def _lab(tmp_path, name: str, text: str = LAB):
    path = tmp_path / f"{name}.yml"
    path.write_text(text.replace("name: k8s-demo", f"name: {name}"))
    return path


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_the_example_across_three_nodes_pings_shapes_is_seen_survives_a_deleted_pod_and_goes(kube, tmp_path):
    done = run_cli("k8s", "deploy", "-t", str(EXAMPLE), "--kubeconfig", kube, "--timeout", "240", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "6 nodes in 3 pods" in done.stderr
    pods = {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in json.loads(_kubectl(kube, "get", "pods", "-o", "json").stdout)["items"]
    }
    assert pods == {"k8s-demo-node1": "node1", "k8s-demo-node2": "node2", "k8s-demo-node3": "node3"}
    lab = "k8s-demo"

    for src, dst in (("h2", "10.0.3.1"), ("h3", "10.0.3.2"), ("a", "10.0.4.2")):  # across the stitched bridge and the cut link
        ping = run_cli("exec", "--lab", lab, src, "--", "ping", "-c2", "-W2", dst)
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
    report = json.loads(run_cli("inspect", "--lab", lab, "--format", "json", check=True).stdout)
    assert {n["name"]: n["k8s_node"] for n in report["nodes"]} == {
        "sw": "node1",
        "h1": "node1",
        "h2": "node2",
        "h3": "node3",
        "a": "node2",
        "b": "node3",
    }
    assert "flowchart" in run_cli("graph", "--lab", lab, "--format", "mermaid", check=True).stdout

    pcap = tmp_path / "h1.pcapng"
    capture = subprocess.Popen(
        [*NESTLAB, "capture", "--lab", lab, "h1:eth1", "-f", "icmp", "-c", "4", "-w", str(pcap)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = subprocess.Popen(
        [*NESTLAB, "events", "--lab", lab, "--format", "json", "-d", "8"], stdout=subprocess.PIPE, text=True
    )
    time.sleep(3)
    run_cli("exec", "--lab", lab, "h3", "--", "ping", "-c3", "-i0.3", "10.0.3.1")
    run_cli("exec", "--lab", lab, "b", "--", "ip", "link", "set", "eth1", "down")
    run_cli("exec", "--lab", lab, "b", "--", "ip", "link", "set", "eth1", "up")
    assert capture.wait(timeout=60) == 0, capture.stderr.read()
    seen = subprocess.run(
        ["tshark", "-r", str(pcap), "-T", "fields", "-e", "ip.src", "-e", "ip.dst"], capture_output=True, text=True
    ).stdout
    assert "10.0.3.3\t10.0.3.1" in seen, seen
    lines = [json.loads(line) for line in events.communicate(timeout=60)[0].splitlines()]
    assert any(e.get("node") == "b" and "eth1" in json.dumps(e) for e in lines), lines

    # link set on a link inside one pod is made by that pod's nestlab; a link cut between pods is refused.
    assert run_cli("link", "set", "--lab", lab, "h1:eth1", "sw:p1", "--down").returncode == 0
    assert run_cli("exec", "--lab", lab, "h3", "--", "ping", "-c1", "-W1", "10.0.3.1").returncode != 0
    assert run_cli("link", "set", "--lab", lab, "h1:eth1", "sw:p1", "--up").returncode == 0
    assert run_cli("exec", "--lab", lab, "h3", "--", "ping", "-c1", "-W3", "10.0.3.1").returncode == 0
    cut = run_cli("link", "set", "--lab", lab, "a:eth1", "b:eth1", "--rate", "20mbit")
    assert cut.returncode == 1 and "pin both ends to one server" in cut.stderr, cut.stderr
    # node stop/start: the pod holding h1 stops it; inspect asks the pods.
    assert run_cli("node", "stop", "--lab", lab, "h1").returncode == 0
    assert run_cli("exec", "--lab", lab, "h3", "--", "ping", "-c1", "-W1", "10.0.3.1").returncode != 0
    states = {n["name"]: n["state"] for n in json.loads(run_cli("inspect", "--lab", lab, "--format", "json").stdout)["nodes"]}
    assert states["h1"] == "stopped" and states["h3"] == "running", states
    assert run_cli("node", "start", "--lab", lab, "h1").returncode == 0
    assert run_cli("exec", "--lab", lab, "h3", "--", "ping", "-c1", "-W3", "10.0.3.1").returncode == 0

    server = subprocess.Popen([*NESTLAB, "exec", "--lab", lab, "b", "--", "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(1)
        client = run_cli("exec", "--lab", lab, "a", "--", "iperf3", "-c", "10.0.4.2", "-t", "3", "-J")
        assert client.returncode == 0, client.stderr
        rate = json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        server.wait(timeout=30)
    assert 30 < rate <= 42, f"the file asks 40 Mbit/s across the stitched link; measured {rate:.1f}"

    _kubectl(kube, "delete", "pod", "k8s-demo-node3", "--wait=false", check=True)  # by hand, mid-lab
    gone = run_cli("destroy", "--lab", lab)
    assert gone.returncode == 0, gone.stderr
    assert "removed from pods k8s-demo-node1, k8s-demo-node2, k8s-demo-node3" in gone.stderr, gone.stderr
    assert not os.path.exists(names.lab_dir(lab))
    assert not _kubectl(
        kube, "get", "pods,configmaps,secrets,services", "-l", f"nestlab.dev/lab={lab}", "-o", "name"
    ).stdout.strip()


def test_render_writes_exactly_what_deploy_creates(kube, tmp_path):
    topo = _lab(tmp_path, "same")
    rendered = yaml.safe_load_all(run_cli("k8s", "render", "-t", str(topo), "--servers", "3", check=True).stdout)
    done = run_cli("k8s", "deploy", "-t", str(topo), "--kubeconfig", kube, "--servers", "3", timeout=300)
    try:
        assert done.returncode == 0, done.stderr
        for want in rendered:
            kind, name = want["kind"].lower(), want["metadata"]["name"]
            have = json.loads(_kubectl(kube, "get", kind, name, "-o", "json", check=True).stdout)
            assert have["metadata"]["labels"] == want["metadata"]["labels"]
            if kind == "secret":
                assert have["data"] == want["data"]
            if kind == "pod":
                assert have["spec"]["containers"][0]["command"] == want["spec"]["containers"][0]["command"]
                assert have["spec"].get("nodeSelector") == want["spec"].get("nodeSelector")
    finally:
        assert run_cli("destroy", "--lab", "same").returncode == 0


def test_no_cluster_and_a_missing_kubeconfig_are_one_line_errors(tmp_path):
    topo = _lab(tmp_path, "nocluster")
    kc = tmp_path / "nowhere.yaml"
    kc.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            }
        )
    )
    started = time.monotonic()
    result = run_cli("k8s", "deploy", "-t", str(topo), "--kubeconfig", str(kc), "--timeout", "10")
    assert result.returncode == 1
    assert "no Kubernetes API at https://127.0.0.1:1" in _one_line_error(result)
    assert time.monotonic() - started < 30
    missing = run_cli("k8s", "deploy", "-t", str(topo), "--kubeconfig", str(tmp_path / "absent.yaml"))
    assert missing.returncode == 1 and "no usable kubeconfig" in _one_line_error(missing)
    assert not os.path.exists(names.lab_dir("nocluster"))


def test_rbac_denied_is_one_line_and_leaves_nothing(kube, tmp_path):
    folder = tmp_path / "pki"
    folder.mkdir()
    ca = os.path.join(names.lab_dir(NAME), "pki")
    for f in ("ca.crt", "ca.key"):
        os.symlink(os.path.join(ca, f), folder / f)
    pki.issue(str(folder), "nobody", "nobody")  # a user the cluster knows, with no role
    config = yaml.safe_load(open(kube))
    config["users"][0]["user"] = {"client-certificate": str(folder / "nobody.crt"), "client-key": str(folder / "nobody.key")}
    weak = tmp_path / "weak.yaml"
    weak.write_text(yaml.safe_dump(config))
    result = run_cli("k8s", "deploy", "-t", str(_lab(tmp_path, "denied")), "--kubeconfig", str(weak), "--timeout", "30")
    assert result.returncode == 1
    assert "RBAC denied" in _one_line_error(result)
    assert not os.path.exists(names.lab_dir("denied"))


def test_a_missing_image_and_an_unschedulable_pod_roll_back(kube, tmp_path):
    image = run_cli(
        "k8s",
        "deploy",
        "-t",
        str(_lab(tmp_path, "noimage")),
        "--kubeconfig",
        kube,
        "--image",
        "localhost/absent:1",
        "--timeout",
        "60",
    )
    assert image.returncode == 1
    line = _one_line_error(image)
    assert "ErrImageNeverPull" in line and "every pod of the lab was deleted" in line
    _kubectl(kube, "taint", "node", "node3", "nestlab-test=1:NoSchedule", check=True)
    try:
        stuck = run_cli("k8s", "deploy", "-t", str(_lab(tmp_path, "tainted")), "--kubeconfig", kube, "--timeout", "60")
    finally:
        _kubectl(kube, "taint", "node", "node3", "nestlab-test-", check=True)
    assert stuck.returncode == 1
    assert "cannot be scheduled" in _one_line_error(stuck) and "taint" in stuck.stderr
    for lab in ("noimage", "tainted"):
        assert not os.path.exists(names.lab_dir(lab))


def test_a_pod_deleted_mid_deploy_fails_the_deploy_and_leaves_nothing(kube, tmp_path):
    def delete_when_created():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _kubectl(kube, "delete", "pod", "killed-node2", "--wait=false").returncode == 0:
                return
            time.sleep(0.1)

    killer = threading.Thread(target=delete_when_created)
    killer.start()
    result = run_cli("k8s", "deploy", "-t", str(_lab(tmp_path, "killed")), "--kubeconfig", kube, "--timeout", "120", timeout=200)
    killer.join()
    assert result.returncode == 1
    assert "killed-node2" in _one_line_error(result)
    assert not os.path.exists(names.lab_dir("killed"))


def test_a_file_pinning_a_node_the_cluster_lacks_exits_2(kube, tmp_path):
    result = run_cli("k8s", "deploy", "-t", str(_lab(tmp_path, "pin", LAB.replace("node3", "node9"))), "--kubeconfig", kube)
    assert result.returncode == 2
    assert re.search(r"pin\.yml:\d+:\d+", result.stderr) and "node9" in result.stderr, result.stderr


def test_a_management_network_spans_the_pods(kube, tmp_path):
    """mgmt: on a lab over three pods: every node answers every other's management address (across the
    pods' joined bridges), `nestlab ssh` reaches a node through its pod, and the lab directory lists them."""
    text = (
        "name: pods-mgmt\nmgmt: {network: podmg, ipv4-subnet: 172.31.78.0/24, ipv6-subnet: '3fff:172:31:78::/64'}\n"
        "topology:\n  nodes:\n    m1: {server: node1}\n    m2: {server: node2}\n    m3: {server: node3}\n"
    )
    topo = _lab(tmp_path, "pods-mgmt", text)
    done = run_cli("k8s", "deploy", "-t", str(topo), "--kubeconfig", kube, "--timeout", "240", timeout=300)
    try:
        assert done.returncode == 0, done.stderr
        data = json.loads((tmp_path / "clab-pods-mgmt" / "topology-data.json").read_text())
        address = {name: node["mgmt-ipv4-address"] for name, node in data["nodes"].items()}
        assert sorted(address) == ["m1", "m2", "m3"], address
        for node in address:
            for other, ip in address.items():
                if other != node:
                    ping = run_cli("exec", "--lab", "pods-mgmt", node, "--", "ping", "-c1", "-W3", ip)
                    assert ping.returncode == 0, (node, other, ping.stdout + ping.stderr)
        relayed = run_cli("ssh", "--lab", "pods-mgmt", "m3", "--", "hostname", timeout=60)
        assert relayed.returncode == 0 and relayed.stdout.strip() == "m3", relayed.stdout + relayed.stderr
    finally:
        gone = run_cli("destroy", "--lab", "pods-mgmt", "--cleanup", timeout=300)
    assert gone.returncode == 0, gone.stderr
    assert not (tmp_path / "clab-pods-mgmt").exists()


def test_z_a_node_that_dies_with_a_share_on_it(kube, tmp_path):
    """Last: node3 stays dead.  A deploy pinned to it fails naming the node; destroy still removes everything."""
    topo = _lab(tmp_path, "dies")
    done = run_cli("k8s", "deploy", "-t", str(topo), "--kubeconfig", kube, timeout=300)
    assert done.returncode == 0, done.stderr
    cluster._kill_below(f"{names.cgroup_name(NAME)}/node3")  # the node's kubelet, containerd and pods, as a crash would
    gone = run_cli("destroy", "--lab", "dies", timeout=300)
    assert gone.returncode == 0, gone.stderr
    assert not _kubectl(kube, "get", "pods", "-l", "nestlab.dev/lab=dies", "-o", "name").stdout.strip()
    again = run_cli("k8s", "deploy", "-t", str(_lab(tmp_path, "dead")), "--kubeconfig", kube, "--timeout", "90", timeout=200)
    assert again.returncode == 1
    assert "node3" in _one_line_error(again)
    assert not os.path.exists(names.lab_dir("dead"))
