"""Lab pods without privilege (docs/security.md), on a 2-node cluster built from source (make test-k8s).

An attacker in a lab node (whoever writes the lab's exec:, cmd: or a node's shell) tries what a privileged pod
allows: write /proc/sysrq-trigger, a kernel setting of the node, mount the node's disk, load a module, see the
node's processes, read the kubelet's files.  In the default pods (hostUsers: false) each is refused; in a
--privileged pod the same script gets through (the contrast that shows the tests would fail without the change).
A pod whose runtime ignored hostUsers: false is caught before any node is made there.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import leftovers, run_cli
from test_k8s_cluster import _cluster_objects, _kubectl

from nestlab.backends.remote.kube import Cluster, ClusterError
from nestlab.engine import state
from nestlab.lab.lab import Lab
from nestlab.sites.k8s import isolation
from nestlab.sites.k8s.manifests import NESTLAB_REF, render
from nestlab.sites.k8s.rollout import Rollout, bring_up
from nestlab.testbeds import cluster

pytestmark = pytest.mark.k8s
NAME = "k8siso"

LAB = """name: {name}
topology:
  nodes:
    sw: {{kind: bridge, server: node1}}
    h1: {{server: node1}}
    h2: {{server: node2}}
    a: {{server: node1}}
    b: {{server: node2}}
  links:
    - {{endpoints: ["h1:eth1", "sw:p1"], ipv4: ["10.0.3.1/24", null]}}
    - {{endpoints: ["h2:eth1", "sw:p2"], ipv4: ["10.0.3.2/24", null]}}
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["10.0.4.1/30", "10.0.4.2/30"]
      params: {{rate: 40mbit}}
"""

# Run as root in a lab node; prints what each attack came to: "done" (it got through) or the errno that stopped it.
# Nothing is written anywhere: files are only opened for writing, a module loaded from /dev/null.
ATTACK = r"""
import ctypes, errno, glob, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
dev = int(sys.argv[1])
found = {}
def attempt(what, fn):
    try:
        fn()
        found[what] = "done"
    except OSError as exc:
        found[what] = errno.errorcode.get(exc.errno, str(exc.errno))
def call(ret):
    if ret != 0:
        raise OSError(ctypes.get_errno(), "")
procs = ["/proc"]
os.makedirs("/tmp/attack/proc", exist_ok=True)
if libc.mount(b"proc", b"/tmp/attack/proc", b"proc", 0, None) == 0:
    procs.append("/tmp/attack/proc")  # a proc of its own: the node's may hide files
def open_any(rel):
    errors = []
    for top in procs:
        try:
            os.close(os.open(f"{top}/{rel}", os.O_WRONLY))
            return
        except OSError as exc:
            errors.append(exc)
    raise errors[-1]
attempt("write /proc/sysrq-trigger", lambda: open_any("sysrq-trigger"))
attempt("write kernel.panic", lambda: open_any("sys/kernel/panic"))
def disk():
    if os.path.exists("/tmp/attack/disk"):
        os.unlink("/tmp/attack/disk")
    os.makedirs("/tmp/attack/mnt", exist_ok=True)
    os.mknod("/tmp/attack/disk", 0o600 | 0o60000, dev)
    call(libc.mount(b"/tmp/attack/disk", b"/tmp/attack/mnt", b"ext4", 0, None))  # read-only would be EBUSY: it is mounted rw
    libc.umount2(b"/tmp/attack/mnt", 2)
attempt("mount the node's disk", disk)
def kubelet():  # a stand-in for the kubelet's key (on this cluster its files are in memory), on the node's disk
    if os.path.exists("/tmp/attack/disk"):
        os.unlink("/tmp/attack/disk")
    os.makedirs("/tmp/attack/mnt", exist_ok=True)
    os.mknod("/tmp/attack/disk", 0o600 | 0o60000, dev)
    call(libc.mount(b"/tmp/attack/disk", b"/tmp/attack/mnt", b"ext4", 0, None))
    try:
        open("/tmp/attack/mnt" + sys.argv[2], "rb").close()
    finally:
        libc.umount2(b"/tmp/attack/mnt", 2)
def module():
    fd = os.open("/dev/null", os.O_RDONLY)
    ret = libc.syscall(313, fd, b"", 0)  # finit_module
    err = ctypes.get_errno()
    os.close(fd)
    if ret != 0 and err == errno.EPERM:
        raise OSError(err, "")
attempt("load a module", module)  # anything but EPERM: the kernel's loader was reached
def processes():
    for top in procs:
        for path in glob.glob(f"{top}/[0-9]*/cmdline"):
            try:
                cmd = open(path, "rb").read().split(b"\0")[0]
            except OSError:
                continue
            if os.path.basename(cmd) in (b"kubelet", b"containerd"):
                return
    raise OSError(errno.ENOENT, "")
attempt("see the node's processes", processes)
attempt("read the kubelet's files", kubelet)
libc.umount2(b"/tmp/attack/proc", 2)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    """A 2-node cluster for the module; down (and checked empty) at the end."""
    if missing := cluster._missing():
        pytest.fail(f"the k8s tier needs {', '.join(missing)}: make test-k8s builds and installs them")
    kubeconfig = str(tmp_path_factory.mktemp("k8s") / "kubeconfig")
    up = run_cli("k8s", "cluster", "up", "--nodes", "2", "--kubeconfig", kubeconfig, "--name", NAME, timeout=900)
    try:
        assert up.returncode == 0, up.stderr
        yield kubeconfig
    finally:
        down = run_cli("k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", NAME, timeout=300)
        assert down.returncode == 0, down.stderr
    assert not [o for o in _cluster_objects() if NAME in o]


@pytest.fixture(autouse=True)
def nothing_left_behind(kube):
    before = set(leftovers())
    yield
    left = sorted(set(leftovers()) - before)
    pods = _kubectl(kube, "get", "pods", "-A", "-l", "nestlab.dev/lab", "-o", "name").stdout.split()
    for lab in set(state.labs()) - {NAME}:
        run_cli("destroy", "--lab", lab)
    _kubectl(kube, "delete", "pods,configmaps,services", "-l", "nestlab.dev/lab", "--grace-period=1")
    assert not left and not pods, f"left behind: {left} {pods}"


def _deploy(kube: str, tmp_path, name: str, *extra: str) -> None:
    path = tmp_path / f"{name}.yml"
    path.write_text(LAB.format(name=name))
    done = run_cli("k8s", "deploy", "-t", str(path), "--kubeconfig", kube, "--timeout", "150", *extra, timeout=200)
    assert done.returncode == 0, done.stderr


def _attack(lab: str, node: str = "a") -> dict[str, str]:
    dev = os.stat("/").st_dev  # this machine's root disk, which the cluster's nodes share
    key = f"/var/tmp/nestlab-{lab}-kubelet.key"  # the kubelet's files here are in memory: a stand-in on the disk
    with open(key, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as fh:
        fh.write("a node's private key\n")
    try:
        found = run_cli("exec", "--lab", lab, node, "--", "python3", "-c", ATTACK, str(dev), key, timeout=120)
    finally:
        os.unlink(key)
    assert found.returncode == 0, found.stdout + found.stderr
    return json.loads(found.stdout.strip().splitlines()[-1])


def test_lab_pods_run_unprivileged_in_user_namespaces_ping_shape_and_refuse_every_attack(kube, tmp_path):
    lab = "iso"
    _deploy(kube, tmp_path, lab)
    try:
        pods = json.loads(_kubectl(kube, "get", "pods", "-l", f"nestlab.dev/lab={lab}", "-o", "json", check=True).stdout)
        assert {p["spec"]["nodeName"] for p in pods["items"]} == {"node1", "node2"}
        for pod in pods["items"]:
            assert pod["spec"]["hostUsers"] is False
            for container in pod["spec"]["containers"]:
                context = container["securityContext"]
                assert not context.get("privileged")
                assert context["capabilities"] == {"drop": ["ALL"], "add": sorted(isolation.CAPABILITIES)}
        mapped = run_cli("exec", "--lab", lab, "a", "--", "cat", "/proc/self/uid_map", check=True).stdout.split()
        assert isolation.isolated(" ".join(mapped)), mapped
        for src, dst in (("h2", "10.0.3.1"), ("a", "10.0.4.2")):  # across the cluster's two nodes
            ping = run_cli("exec", "--lab", lab, src, "--", "ping", "-c2", "-W2", dst)
            assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
        shaped = run_cli("exec", "--lab", lab, "a", "--", "tc", "class", "show", "dev", "eth1", check=True).stdout
        assert "htb" in shaped and "rate 40Mbit" in shaped, shaped
        found = _attack(lab)
        assert set(found) == {
            "write /proc/sysrq-trigger",
            "write kernel.panic",
            "mount the node's disk",
            "load a module",
            "see the node's processes",
            "read the kubelet's files",
        }
        assert not [what for what, came in found.items() if came == "done"], found
    finally:
        assert run_cli("destroy", "--lab", lab, timeout=200).returncode == 0


def test_a_privileged_pod_lets_the_same_attacks_through(kube, tmp_path):
    """The contrast: what the attacks above do in the pods nestlab made before (and makes with --privileged)."""
    lab = "priv"
    _deploy(kube, tmp_path, lab, "--privileged")
    try:
        mapped = run_cli("exec", "--lab", lab, "a", "--", "cat", "/proc/self/uid_map", check=True).stdout.split()
        assert mapped == ["0", "0", "4294967295"]
        found = _attack(lab)
        through = ["write kernel.panic", "mount the node's disk", "load a module", "read the kubelet's files"]
        if os.path.exists("/proc/sysrq-trigger"):  # a kernel without CONFIG_MAGIC_SYSRQ (this machine's) has none
            through.append("write /proc/sysrq-trigger")
        for what in through:
            assert found[what] == "done", found
    finally:
        assert run_cli("destroy", "--lab", lab, timeout=200).returncode == 0


def _ignoring(manifests: list[dict]) -> list[dict]:
    """The manifests as a runtime that ignores hostUsers: false runs them: the pods without it."""
    for manifest in manifests:
        manifest.get("spec", {}).pop("hostUsers", None)
        for container in manifest.get("spec", {}).get("containers", []):
            container["securityContext"].pop("procMount")  # the API takes it only with hostUsers: false
    return manifests


def test_a_pod_whose_runtime_ignored_hostusers_makes_no_node_and_is_reported(kube, tmp_path):
    path = tmp_path / "ignored.yml"
    path.write_text(LAB.format(name="ignored"))
    lab = Lab.from_file(path)
    api = Cluster(kube, timeout=60)
    # the pod's own start script: it reads its uid map and refuses to deploy
    manifests, parts = render(lab.blueprint, 2, NESTLAB_REF, api.namespace, {"node1", "node2"})
    for manifest in _ignoring(manifests):
        api.create(manifest)
    try:
        deadline = time.monotonic() + 90
        while _kubectl(kube, "exec", "ignored-node1", "--", "cat", "/run/nestlab-k8s/rc").stdout.strip() != str(
            isolation.REFUSED
        ):
            assert time.monotonic() < deadline, _kubectl(kube, "describe", "pod", "ignored-node1").stdout[-1500:]
            _kubectl(kube, "exec", "ignored-node1", "--", "sh", "-c", "echo NESTLAB_PEER_NODE1=x > /run/nestlab-k8s/peers.env")
            time.sleep(0.5)
        said = _kubectl(kube, "exec", "ignored-node1", "--", "cat", "/run/nestlab-k8s/deploy.log").stdout
        assert "not a user namespace of its own" in said and "no node made" in said, said
        assert _kubectl(kube, "exec", "ignored-node1", "--", "ip", "netns", "list").stdout.strip() == ""
    finally:
        api.delete_all("nestlab.dev/lab=ignored", time.monotonic() + 60, grace=1)
    # the deploy: the pod's uid map read from outside, the runtime named, every pod deleted
    manifests, parts = render(lab.blueprint, 2, NESTLAB_REF, api.namespace, {"node1", "node2"})
    with pytest.raises(ClusterError) as caught:
        bring_up(api, lab.blueprint, _ignoring(manifests), parts, time.monotonic() + 120, lambda _m: None)
    message = str(caught.value)
    assert "although it asked for hostUsers: false" in message and "containerd://2.2.9" in message, message
    assert not api.pods("nestlab.dev/lab=ignored"), "the deploy deletes every pod of the lab"


def test_a_cluster_without_user_namespaces_is_refused_with_the_reason(kube, tmp_path):
    """A deploy to this cluster with its nodes reporting what containerd 1.6's do (no user namespaces): refused with
    the reason before any pod is made (the same deploy makes its pods on the cluster as it reports itself)."""
    api = Cluster(kube, timeout=30)
    nodes = api.nodes()
    assert all(node["userns"] and node["runtime"] == "containerd://2.2.9" for node in nodes.values()), nodes
    old = {name: {**node, "userns": False, "runtime": "containerd://1.6.20"} for name, node in nodes.items()}
    api.nodes = lambda: old  # type: ignore[method-assign]
    made: list[str] = []
    create = api.create
    api.create = lambda manifest: (made.append(manifest["metadata"]["name"]), create(manifest))[1]  # type: ignore[method-assign]
    path = tmp_path / "old.yml"
    path.write_text(LAB.format(name="old"))
    try:
        with pytest.raises(ClusterError) as caught:
            Rollout.of(api, Lab.from_file(path).blueprint, NESTLAB_REF).run(time.monotonic() + 60, lambda _m: None)
    finally:
        api.delete_all("nestlab.dev/lab=old", time.monotonic() + 60, grace=1)
    why = str(caught.value)
    assert "node1, node2 (running containerd://1.6.20)" in why and "--privileged" in why, why
    assert not made, f"pods made on a cluster that cannot isolate them: {made}"
