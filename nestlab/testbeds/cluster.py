"""``nestlab k8s cluster up|down``: a real Kubernetes cluster on this machine, from source, for CI and demos.

The cluster is itself a lab (named ``k8s`` unless told): a bridge ``underlay`` (198.18.1.0/24), a
node ``control`` running etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and nodes
``node1`` .. ``nodeN``, each an emulated server running its own containerd and kubelet:

* its own network namespace on the underlay, and a pod subnet 198.19.I.0/24 behind a bridge ``cni0``
  (the CNI bridge plugin); every node routes the other nodes' pod subnets over the underlay;
* its own cgroup namespace rooted at ``nestlab.CLUSTER/nodeI`` in every hierarchy, so each kubelet
  sees a machine of its own and everything it starts (containerd's shims, the pods) stays below;
* its own mount namespace: fresh sysfs and cgroup mounts, tmpfs on /run, /var/lib and /var/log, the
  kernel settings the kubelet insists on shown to it as files (so this machine's stay as they are);
  its state (kubelet, containerd, logs) under ``/run/nestlab/CLUSTER/nodes/nodeI``;
* the nestlab image built from this checkout and the pause image imported into its containerd.

This machine reaches the API over a marked veth on the underlay (never a real NIC); certificates
come from a CA made for the cluster.  ``cluster down`` kills every process below the cluster's
cgroups, removes the lab and the kubeconfig it wrote: mounts and namespaces die with their processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from typing import Any

import yaml

from .. import names, sites
from ..backends.kernel import files, netlink
from ..backends.kernel.cgroups import remove_tree
from ..backends.remote.kube import Cluster
from ..engine import cleanup, state
from ..errors import LabError
from ..lab.lab import Lab
from .control_plane import API_PORT, BIN, UNDERLAY, address, control_files, issue_certificates, node_ip, write_kubeconfig
from .images import nestlab_image, pause_image
from .kubelets import RUNTIME, cgroup_mounts, node_files

RECORD = "cluster.json"
_DEBIAN = {
    "etcd": "etcd-server",
    "unshare": "util-linux",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "openssl": "openssl",
}


def _missing() -> list[str]:
    missing = [f"{c} ({pkg})" for c, pkg in _DEBIAN.items() if not (os.path.exists(c) if c.startswith("/") else shutil.which(c))]
    missing += [
        f"{BIN}/{c} (make k8s)"
        for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "pause")
        if not os.access(os.path.join(BIN, c), os.X_OK)
    ]
    missing += [
        f"{RUNTIME}/{c} (make k8s)"
        for c in ("containerd", "containerd-shim-runc-v2", "ctr", "runc")
        if not os.access(os.path.join(RUNTIME, c), os.X_OK)
    ]
    return missing


def record(name: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(names.lab_dir(name), RECORD)) as fh:
            found: dict[str, Any] = json.load(fh)
            return found
    except (FileNotFoundError, ValueError):
        return None


def name_in(kubeconfig: str) -> str | None:
    """The cluster lab a kubeconfig written by ``cluster up`` belongs to (its cluster is ``nestlab-NAME``)."""
    try:
        with open(kubeconfig) as fh:
            found = yaml.safe_load(fh) or {}
        cluster = found["clusters"][0]["name"]
    except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return None
    return cluster.removeprefix("nestlab-") if cluster.startswith("nestlab-") else None


def up(count: int, kubeconfig: str, name: str = "k8s", timeout: float = 300, log: Callable[[str], None] = lambda _m: None) -> str:
    """Start a cluster of ``count`` nodes; write its admin kubeconfig to ``kubeconfig``; returns its path."""
    if not 1 <= count <= 200:
        raise LabError("--nodes must be between 1 and 200")
    if missing := _missing():
        raise LabError("the cluster needs " + ", ".join(missing) + ": run `make k8s`")
    if state.read(name) or cleanup.marked_namespaces(name) or os.path.isdir(names.lab_dir(name)):
        raise LabError(f"lab '{name}' already exists: `nestlab k8s cluster down --name {name}` first")
    if running := [other for other in state.labs() if record(other)]:
        raise LabError(
            f"cluster {running[0]} already runs on this machine ({UNDERLAY}, one cluster at a time): "
            f"`nestlab k8s cluster down --name {running[0]}` first"
        )
    kubeconfig = os.path.abspath(kubeconfig)
    started = time.monotonic()
    try:
        images = [nestlab_image(log), pause_image(os.path.join(BIN, "pause"))]
        home = names.lab_dir(name)
        os.makedirs(home)
        kept = {"nodes": count, "kubeconfig": kubeconfig, "started": time.time()}
        files.write(os.path.join(home, RECORD), json.dumps(kept), 0o644, sync=False)
        log("certificates")
        issue_certificates(name, count)
        control_files(name, count)
        for i in range(1, count + 1):
            node_files(name, i, count, images)
        log(f"starting etcd, the API server and {count} nodes")
        lab = Lab.from_text(_topology(name, count), f"<k8s cluster {name}>")
        lab.deploy()
        _address_controller(name)
        write_kubeconfig(kubeconfig, name, os.path.join(home, "pki"), "admin")
        _wait_ready(kubeconfig, count, started + timeout, name, log)
    except BaseException:
        down(name, kubeconfig)
        raise
    return kubeconfig


def down(name: str = "k8s", kubeconfig: str | None = None) -> bool:
    """Remove the cluster ``name``: every process below its cgroups, the lab, the kubeconfig it wrote.
    Returns whether there was anything to remove."""

    found = record(name)
    existed = bool(found or state.read(name) or cleanup.marked_namespaces(name) or os.path.isdir(names.lab_dir(name)))
    _kill_below(names.cgroup_name(name))
    sites.remove(name)
    _remove_cgroups(names.cgroup_name(name))
    for path in {kubeconfig, (found or {}).get("kubeconfig")} - {None}:
        assert path is not None  # the set's Nones are taken out
        if name_in(path) == name:
            os.unlink(path)
    return existed


def _kill_below(top: str, timeout: float = 20) -> None:
    """SIGKILL every process in the cgroup ``top`` and below it, in every hierarchy, until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for point, _kind, _opts in cgroup_mounts():
            for root, _dirs, entries in os.walk(os.path.join(point, top)):
                if "cgroup.procs" in entries:
                    with open(os.path.join(root, "cgroup.procs")) as fh:
                        pids |= {int(p) for p in fh.read().split()}
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise LabError(f"processes {sorted(pids)[:10]} in cgroup {top} do not die")
        time.sleep(0.1)


def _remove_cgroups(top: str) -> None:
    for point, _kind, _opts in cgroup_mounts():
        remove_tree(os.path.join(point, top), timeout=10)


def _topology(name: str, count: int) -> str:
    prefix = UNDERLAY.prefixlen
    nodes: dict[str, Any] = {
        "underlay": {"kind": "bridge"},
        "control": {
            "cmd": f"exec unshare --mount --propagation private sh {names.node_dir(name, 'control')}/start.sh",
            "healthcheck": {"test": ["CMD-SHELL", f"ss -ltn | grep -q ':{API_PORT} '"], "interval": 0.2, "retries": 600},
        },
    }
    links = [{"endpoints": ["control:eth0", "underlay:control"], "ipv4": [f"{address(1)}/{prefix}", None]}]
    for i in range(1, count + 1):
        nodes[f"node{i}"] = {"cmd": f"exec sh {names.node_dir(name, f'node{i}')}/join.sh"}
        links.append({"endpoints": [f"node{i}:eth0", f"underlay:node{i}"], "ipv4": [f"{node_ip(i)}/{prefix}", None]})
    links.append({"endpoints": ["underlay:ctl"], "mode": "machine-veth", "host_interface": _controller_if(name)})
    text: str = yaml.safe_dump({"name": name, "topology": {"nodes": nodes, "links": links}}, sort_keys=False)
    return text


def _controller_if(name: str) -> str:
    return f"nlk-{name}"[: names.IFNAMSIZ]


def _address_controller(name: str) -> None:
    nl = netlink.Netlink()
    try:
        (index,) = nl.run(netlink.get_link(_controller_if(name)))
        nl.run(netlink.new_addr(index, f"{address(254)}/{UNDERLAY.prefixlen}", _controller_if(name)))
    finally:
        nl.close()


def _wait_ready(kubeconfig: str, count: int, deadline: float, name: str, log: Callable[[str], None]) -> None:
    api = Cluster(kubeconfig, timeout=max(5.0, deadline - time.monotonic()))
    log(f"waiting for {count} nodes to be Ready")
    api.wait_nodes_ready(
        [f"node{i}" for i in range(1, count + 1)],
        deadline,
        why=lambda node: _last_lines(os.path.join(names.node_dir(name, node), "kubelet.log")),
    )
    log("waiting for the controller manager (the default service account, which every pod needs)")
    api.wait_service_account(
        "default", deadline, why=lambda: _last_lines(os.path.join(names.node_dir(name, "control"), "kube-controller-manager.log"))
    )


def _last_lines(path: str, count: int = 3) -> str:
    try:
        with open(path, errors="replace") as fh:
            lines = [ln.strip() for ln in fh.read().splitlines() if ln.strip()]
    except FileNotFoundError:
        return "no log"
    return " / ".join(lines[-count:])[-600:]
