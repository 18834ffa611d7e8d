"""The cluster's nodes node1..nodeN, each an emulated server: the files and scripts that give it a cgroup, mounts
and sysctls of its own, a pod network, containerd with the images imported, and a kubelet."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
from typing import Any

import yaml

from .. import names
from ..backends.kernel import mounts
from .control_plane import API_PORT, BIN, PODS, SERVICES, address, kubeconfig_for, node_ip, write

# containerd 2.x and runc 1.2+ (k8s/runtime/go.mod), which run a pod with hostUsers: false in a user namespace
# of its own; Debian 12's containerd 1.6 ignores the field and runs such a pod as the node's root.
RUNTIME = os.environ.get("NESTLAB_K8S_RUNTIME", "/var/cache/nestlab/runtime/v2.2.9-1.4.4/bin")
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


def cgroup_mounts() -> list[tuple[str, str, str]]:
    """(mount point, type, options) of every cgroup hierarchy mounted on this machine."""
    return [(m.point, m.fstype, ",".join(o for o in m.options if o not in ("rw", "ro"))) for m in mounts.cgroups()]


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


def node_files(name: str, i: int, count: int, images: list[str]) -> None:
    """nodeI's start scripts and configuration, under its folder (seen as /var/lib/node inside it)."""
    node = f"node{i}"
    home = names.node_dir(name, node)
    _node_pki(name, node, home)
    write(os.path.join(home, "kubelet.yaml"), yaml.safe_dump(_kubelet_config(i), sort_keys=False))
    write(os.path.join(home, "containerd.toml"), _CONTAINERD)
    write(os.path.join(home, "cni", "10-nestlab.conflist"), json.dumps(_cni_config(i), indent=1))
    for key, value in _KUBELET_SYSCTLS.items():
        write(os.path.join(home, "sysctl", key), value + "\n")
    write(os.path.join(home, "join.sh"), "\n".join(_join_script(name, node, home)) + "\n")
    write(os.path.join(home, "start.sh"), "\n".join(_start_script(i, count, home, images)) + "\n")


def _node_pki(name: str, node: str, home: str) -> None:
    """The node's certificate, key and the cluster's CA copied into its folder, and its kubelet's kubeconfig naming them."""
    pki_dir = os.path.join(names.lab_dir(name), "pki")
    for f in ("ca.crt", f"{node}.crt", f"{node}.key"):
        os.makedirs(os.path.join(home, "pki"), exist_ok=True)
        shutil.copy(os.path.join(pki_dir, f), os.path.join(home, "pki", f))
    kubeconfig = kubeconfig_for(name, f"{_INSIDE}/pki", node, embed=False)
    kubeconfig["clusters"][0]["cluster"]["certificate-authority"] = f"{_INSIDE}/pki/ca.crt"
    write(os.path.join(home, "kubelet.kubeconfig"), yaml.safe_dump(kubeconfig, sort_keys=False))


def _kubelet_config(i: int) -> dict[str, Any]:
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


def _cni_config(i: int) -> dict[str, Any]:
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
    procs = [f"{point}/{names.cgroup_name(name)}" for point, _k, _o in cgroup_mounts()]
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
    hierarchies = [
        f"mkdir -p /sys/fs/cgroup{point.removeprefix('/sys/fs/cgroup')} && mount -t {kind} -o {opts or 'none'} {kind} {point}"
        if kind == "cgroup"
        else f"mkdir -p {point} && mount -t cgroup2 cgroup2 {point}"
        for point, kind, opts in cgroup_mounts()
    ]
    routes = [f"ip route add {PODS.format(j)} via {node_ip(j)}" for j in range(1, count + 1) if j != i]
    return [
        "set -e",
        "ip link set lo up",
        "echo 1 > /proc/sys/net/ipv4/ip_forward",
        "mount -t sysfs sysfs /sys",
        "mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup",
        *hierarchies,
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
        f"add rule ip kubernetes_service pre ip daddr {service} tcp dport 443 dnat to {address(1)}:{API_PORT}'"
    )
