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

import base64
import ipaddress
import json
import os
import shlex
import shutil
import signal
import time
from collections.abc import Callable

import yaml

from .. import names, sites
from ..backends.kernel import mounts, netlink
from ..backends.kernel.cgroups import remove_tree
from ..backends.remote import pki
from ..backends.remote.kube import Cluster
from ..engine import cleanup, state
from ..errors import LabError
from ..lab.lab import Lab
from .images import nestlab_image, pause_image

BIN = os.environ.get("NESTLAB_K8S_BIN", "/var/cache/nestlab/k8s/v1.34.2/bin")
# containerd 2.x and runc 1.2+ (k8s/runtime/go.mod), which run a pod with hostUsers: false in a user namespace
# of its own; Debian 12's containerd 1.6 ignores the field and runs such a pod as the node's root.
RUNTIME = os.environ.get("NESTLAB_K8S_RUNTIME", "/var/cache/nestlab/runtime/v2.2.9-1.4.4/bin")
UNDERLAY = ipaddress.IPv4Network("198.18.1.0/24")  # RFC 2544's benchmarking range: not routed anywhere
PODS = "198.19.{}.0/24"  # node I's pod subnet
SERVICES = "198.19.255.0/24"
API_PORT = 6443
RECORD = "cluster.json"
_DEBIAN = {
    "etcd": "etcd-server",
    "unshare": "util-linux",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "openssl": "openssl",
}
# The values the kubelet sets on the machine unless it finds them (protectKernelDefaults false): shown to
# each kubelet as files in its mount namespace instead, so this machine's own settings never change.
_KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


def _address(index: int) -> str:
    """control is .1, nodeI is .(10+I), this machine .254."""
    return str(UNDERLAY.network_address + index)


def node_ip(i: int) -> str:
    return _address(10 + i)


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


def record(name: str) -> dict | None:
    try:
        with open(os.path.join(names.lab_dir(name), RECORD)) as fh:
            return json.load(fh)
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
        with open(os.path.join(home, RECORD), "w") as fh:
            json.dump({"nodes": count, "kubeconfig": kubeconfig, "started": time.time()}, fh)
        log("certificates")
        _pki(name, count)
        _control_files(name, count)
        for i in range(1, count + 1):
            _node_files(name, i, count, images)
        log(f"starting etcd, the API server and {count} nodes")
        lab = Lab.from_text(_topology(name, count), f"<k8s cluster {name}>")
        lab.deploy()
        _address_controller(name)
        _write_kubeconfig(kubeconfig, name, os.path.join(home, "pki"), "admin")
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
        if name_in(path) == name:
            os.unlink(path)
    return existed


def _cgroup_mounts() -> list[tuple[str, str, str]]:
    """(mount point, type, options) of every cgroup hierarchy mounted on this machine."""
    return [(m.point, m.fstype, ",".join(o for o in m.options if o not in ("rw", "ro"))) for m in mounts.cgroups()]


def _kill_below(top: str, timeout: float = 20) -> None:
    """SIGKILL every process in the cgroup ``top`` and below it, in every hierarchy, until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for point, _kind, _opts in _cgroup_mounts():
            for root, _dirs, files in os.walk(os.path.join(point, top)):
                if "cgroup.procs" in files:
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
    for point, _kind, _opts in _cgroup_mounts():
        remove_tree(os.path.join(point, top), timeout=10)


def _pki(name: str, count: int) -> None:
    folder = os.path.join(names.lab_dir(name), "pki")
    pki.authority(folder, f"nestlab-{name}-ca")
    sans = (
        "IP:" + _address(1),
        "IP:" + str(ipaddress.IPv4Network(SERVICES).network_address + 1),
        "IP:127.0.0.1",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
        "DNS:localhost",
    )
    pki.issue(folder, "apiserver", "kube-apiserver", sans=sans, server=True)
    pki.issue(folder, "apiserver-kubelet", "kube-apiserver-kubelet-client", ("system:masters",))
    pki.issue(folder, "admin", "nestlab-admin", ("system:masters",))
    pki.issue(folder, "controller-manager", "system:kube-controller-manager")
    pki.issue(folder, "scheduler", "system:kube-scheduler")
    for i in range(1, count + 1):
        pki.issue(folder, f"node{i}", f"system:node:node{i}", ("system:nodes",))
    pki.keypair(folder, "service-accounts")


def _kubeconfig(name: str, pki_dir: str, user: str, embed: bool) -> dict:
    def ref(key: str, path: str) -> dict:
        if embed:
            with open(path, "rb") as fh:
                return {f"{key}-data": base64.b64encode(fh.read()).decode()}
        return {key: path}

    cluster = f"nestlab-{name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": cluster,
        "preferences": {},
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": f"https://{_address(1)}:{API_PORT}",
                    **ref("certificate-authority", os.path.join(pki_dir, "ca.crt")),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    **ref("client-certificate", os.path.join(pki_dir, f"{user}.crt")),
                    **ref("client-key", os.path.join(pki_dir, f"{user}.key")),
                },
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user, "namespace": "default"}}],
    }


def _write_kubeconfig(path: str, name: str, pki_dir: str, user: str, embed: bool = True) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(_kubeconfig(name, pki_dir, user, embed), fh, sort_keys=False)


def _control_files(name: str, count: int) -> None:
    """The control node's kubeconfigs and start script: routes to the nodes' pods (which reach the API through the
    kubernetes Service), etcd, the API server, the controller manager, the scheduler."""
    home = names.node_dir(name, "control")
    pki_dir = os.path.join(names.lab_dir(name), "pki")
    os.makedirs(os.path.join(home, "etcd"))
    for user in ("controller-manager", "scheduler"):
        _write_kubeconfig(os.path.join(home, f"{user}.kubeconfig"), name, pki_dir, user, embed=False)
    commands = {
        "etcd": _etcd_command(home),
        "kube-apiserver": _apiserver_command(pki_dir),
        "kube-controller-manager": _controller_manager_command(home, pki_dir),
        "kube-scheduler": _scheduler_command(home),
    }
    script = [
        "set -e",
        "ip link set lo up",
        f"mount -t tmpfs -o mode=0700 etcd {home}/etcd  # etcd's fsyncs go to memory: the cluster lives as long as the lab",
        *(f"ip route add {PODS.format(i)} via {node_ip(i)}" for i in range(1, count + 1)),
        *(f"{shlex.join(command)} > {home}/{log}.log 2>&1 &" for log, command in commands.items()),
        "wait",
    ]
    _write(os.path.join(home, "start.sh"), "\n".join(script) + "\n")


def _apiserver_command(pki_dir: str) -> list[str]:
    """kube-apiserver on the control node's underlay address, its certificates in ``pki_dir``."""
    p = lambda f: os.path.join(pki_dir, f)  # noqa: E731
    return [
        f"{BIN}/kube-apiserver",
        "--etcd-servers=http://127.0.0.1:2379",
        f"--bind-address={_address(1)}",
        f"--advertise-address={_address(1)}",
        f"--secure-port={API_PORT}",
        f"--tls-cert-file={p('apiserver.crt')}",
        f"--tls-private-key-file={p('apiserver.key')}",
        f"--client-ca-file={p('ca.crt')}",
        f"--kubelet-client-certificate={p('apiserver-kubelet.crt')}",
        f"--kubelet-client-key={p('apiserver-kubelet.key')}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-key-file={p('service-accounts.pub')}",
        f"--service-account-signing-key-file={p('service-accounts.key')}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICES}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
        "--endpoint-reconciler-type=none",
    ]


def _controller_manager_command(home: str, pki_dir: str) -> list[str]:
    """kube-controller-manager, signing service accounts' tokens with the cluster's key."""
    return [
        f"{BIN}/kube-controller-manager",
        f"--kubeconfig={home}/controller-manager.kubeconfig",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--service-account-private-key-file={os.path.join(pki_dir, 'service-accounts.key')}",
        f"--root-ca-file={os.path.join(pki_dir, 'ca.crt')}",
        "--use-service-account-credentials=true",
        "--node-monitor-grace-period=20s",
        "--profiling=false",
    ]


def _scheduler_command(home: str) -> list[str]:
    """kube-scheduler, alone (no leader election)."""
    return [
        f"{BIN}/kube-scheduler",
        f"--kubeconfig={home}/scheduler.kubeconfig",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--profiling=false",
    ]


def _etcd_command(home: str) -> list[str]:
    """A one-member etcd on the control node's loopback, its data under ``home``."""
    return [
        "etcd",
        "--name=control",
        f"--data-dir={home}/etcd",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=control=http://127.0.0.1:2380",
    ]


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


_INSIDE = "/var/lib/node"  # where a node sees its folder
_CONTAINERD = f"""version = 3
root = "{_INSIDE}/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/pause:nestlab"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true  # no lower OOM score than containerd's: a machine without CAP_SYS_RESOURCE allows no less
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{RUNTIME}/runc"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{_INSIDE}/cni"
"""


def _node_files(name: str, i: int, count: int, images: list[str]) -> None:
    """nodeI's start scripts and configuration, under its folder (seen as /var/lib/node inside it)."""
    node = f"node{i}"
    home = names.node_dir(name, node)
    _node_pki(name, node, home)
    _write(os.path.join(home, "kubelet.yaml"), yaml.safe_dump(_kubelet_config(i), sort_keys=False))
    _write(os.path.join(home, "containerd.toml"), _CONTAINERD)
    _write(os.path.join(home, "cni", "10-nestlab.conflist"), json.dumps(_cni_config(i), indent=1))
    for key, value in _KUBELET_SYSCTLS.items():
        _write(os.path.join(home, "sysctl", key), value + "\n")
    _write(os.path.join(home, "join.sh"), "\n".join(_join_script(name, node, home)) + "\n")
    _write(os.path.join(home, "start.sh"), "\n".join(_start_script(i, count, home, images)) + "\n")


def _node_pki(name: str, node: str, home: str) -> None:
    """The node's certificate, key and the cluster's CA copied into its folder, and its kubelet's kubeconfig naming them."""
    pki_dir = os.path.join(names.lab_dir(name), "pki")
    for f in ("ca.crt", f"{node}.crt", f"{node}.key"):
        os.makedirs(os.path.join(home, "pki"), exist_ok=True)
        shutil.copy(os.path.join(pki_dir, f), os.path.join(home, "pki", f))
    kubeconfig = _kubeconfig(name, f"{_INSIDE}/pki", node, embed=False)
    kubeconfig["clusters"][0]["cluster"]["certificate-authority"] = f"{_INSIDE}/pki/ca.crt"
    _write(os.path.join(home, "kubelet.kubeconfig"), yaml.safe_dump(kubeconfig, sort_keys=False))


def _kubelet_config(i: int) -> dict:
    """nodeI's KubeletConfiguration: cgroupfs, containerd, no swap or cgroup v1 checks, quick status updates."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "address": node_ip(i),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": f"{_INSIDE}/pki/ca.crt"},
        },
        "authorization": {"mode": "AlwaysAllow"},  # only holders of a certificate from the cluster's CA reach it
        "makeIPTablesUtilChains": False,
        "serializeImagePulls": False,
        "resolvConf": "",  # pods ask no DNS server of this machine
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "podLogsDir": "/var/log/pods",
        "containerLogMaxFiles": 2,
    }


def _cni_config(i: int) -> dict:
    """nodeI's pod network: a bridge, its addresses from the node's pod subnet."""
    return {
        "cniVersion": "0.4.0",
        "name": "nestlab-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": PODS.format(i)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/var/lib/cni/networks",
                },
            }
        ],
    }


def _join_script(name: str, node: str, home: str) -> list[str]:
    """The script that puts the node in a cgroup of its own under the lab's, then runs its start script."""
    procs = [f"{point}/{names.cgroup_name(name)}" for point, _k, _o in _cgroup_mounts()]
    return [
        "set -e",
        f"for top in {' '.join(procs)}; do",
        f'  mkdir -p "$top/{node}"',
        '  for f in cpuset.cpus cpuset.mems; do if [ -f "$top/$f" ]; then',
        '    [ -n "$(cat "$top/$f")" ] || cat "$top/../$f" > "$top/$f"; [ -n "$(cat "$top/'
        + node
        + '/$f")" ] || cat "$top/$f" > "$top/'
        + node
        + '/$f"; fi; done',
        f'  echo $$ > "$top/{node}/cgroup.procs"',
        "done",
        f"exec unshare --cgroup --mount --propagation private sh {home}/start.sh",
    ]


def _start_script(i: int, count: int, home: str, images: list[str]) -> list[str]:
    """nodeI's start script: its own /sys, cgroups, /var/lib, /run and sysctls, routes to the other nodes' pods,
    containerd with the images imported, then the kubelet."""
    cgroup_mounts = [
        f"mkdir -p /sys/fs/cgroup{point.removeprefix('/sys/fs/cgroup')} && mount -t {kind} -o {opts or 'none'} {kind} {point}"
        if kind == "cgroup"
        else f"mkdir -p {point} && mount -t cgroup2 cgroup2 {point}"
        for point, kind, opts in _cgroup_mounts()
    ]
    routes = [f"ip route add {PODS.format(j)} via {node_ip(j)}" for j in range(1, count + 1) if j != i]
    return [
        "set -e",
        "ip link set lo up",
        "echo 1 > /proc/sys/net/ipv4/ip_forward",
        "mount -t sysfs sysfs /sys",
        "mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup",
        *cgroup_mounts,
        f"mount -t tmpfs -o mode=0755 node-lib /var/lib && mkdir -p {_INSIDE} /var/lib/cni /var/lib/kubelet && mount --bind {home} {_INSIDE}",
        "mount -t tmpfs -o mode=0755 node-run /run && mkdir -p /run/containerd /run/netns",
        "mount -t tmpfs -o mode=0755 node-log /var/log",
        # a proc with nothing mounted on it: the kernel lets a pod in a user namespace mount its own proc only while
        # one is fully visible in the mount namespace its runtime copies (the sysctl files below hide parts of /proc)
        "mkdir -p /run/nestlab-proc && mount -t proc proc /run/nestlab-proc",
        *(f"mount --bind {_INSIDE}/sysctl/{key} /proc/sys/{key}" for key in _KUBELET_SYSCTLS),
        *routes,
        _api_service(),
        f"export PATH={RUNTIME}:$PATH  # containerd finds its shim, containerd-shim-runc-v2, on PATH",
        f"containerd --config {_INSIDE}/containerd.toml > {_INSIDE}/containerd.log 2>&1 &",
        "until [ -S /run/containerd/containerd.sock ]; do sleep 0.1; done",
        *(
            f"ctr -n k8s.io images import {image} > /dev/null  # unpacked here, once, not when a lab's first pod starts"
            for image in images
        ),
        f"exec {BIN}/kubelet --config {_INSIDE}/kubelet.yaml --kubeconfig {_INSIDE}/kubelet.kubeconfig --root-dir /var/lib/kubelet "
        f"--hostname-override node{i} --node-ip {node_ip(i)} > {_INSIDE}/kubelet.log 2>&1",
    ]


def _api_service() -> str:
    """The kubernetes Service (the API, which pods find at its first address, port 443) without kube-proxy: each
    node's netfilter sends its pods' packets for it to the API server (an operator's pod talks to the API)."""
    service = ipaddress.IPv4Network(SERVICES).network_address + 1
    return (
        "nft 'add table ip kubernetes_service; add chain ip kubernetes_service pre { type nat hook prerouting priority dstnat; }; "
        f"add rule ip kubernetes_service pre ip daddr {service} tcp dport 443 dnat to {_address(1)}:{API_PORT}'"
    )


def _topology(name: str, count: int) -> str:
    prefix = UNDERLAY.prefixlen
    nodes: dict = {
        "underlay": {"kind": "bridge"},
        "control": {
            "cmd": f"exec unshare --mount --propagation private sh {names.node_dir(name, 'control')}/start.sh",
            "healthcheck": {"test": ["CMD-SHELL", f"ss -ltn | grep -q ':{API_PORT} '"], "interval": 0.2, "retries": 600},
        },
    }
    links = [{"endpoints": ["control:eth0", "underlay:control"], "ipv4": [f"{_address(1)}/{prefix}", None]}]
    for i in range(1, count + 1):
        nodes[f"node{i}"] = {"cmd": f"exec sh {names.node_dir(name, f'node{i}')}/join.sh"}
        links.append({"endpoints": [f"node{i}:eth0", f"underlay:node{i}"], "ipv4": [f"{node_ip(i)}/{prefix}", None]})
    links.append({"endpoints": ["underlay:ctl"], "mode": "machine-veth", "host_interface": _controller_if(name)})
    return yaml.safe_dump({"name": name, "topology": {"nodes": nodes, "links": links}}, sort_keys=False)


def _controller_if(name: str) -> str:
    return f"nlk-{name}"[: names.IFNAMSIZ]


def _address_controller(name: str) -> None:
    nl = netlink.Netlink()
    try:
        (index,) = nl.run(netlink.get_link(_controller_if(name)))
        nl.run(netlink.new_addr(index, f"{_address(254)}/{UNDERLAY.prefixlen}", _controller_if(name)))
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
