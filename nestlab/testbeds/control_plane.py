"""The cluster's control node (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and what every part
of the cluster is told about it: the underlay's addresses, the certificates of the cluster's CA, kubeconfigs."""

from __future__ import annotations

import base64
import ipaddress
import os
import shlex
from typing import Any

import yaml

from .. import names
from ..backends.kernel import files
from ..backends.remote import pki

BIN = os.environ.get("NESTLAB_K8S_BIN", "/var/cache/nestlab/k8s/v1.34.2/bin")
UNDERLAY = ipaddress.IPv4Network("198.18.1.0/24")  # RFC 2544's benchmarking range: not routed anywhere
PODS = "198.19.{}.0/24"  # node I's pod subnet
SERVICES = "198.19.255.0/24"
API_PORT = 6443


def address(index: int) -> str:
    """control is .1, nodeI is .(10+I), this machine .254."""
    return str(UNDERLAY.network_address + index)


def node_ip(i: int) -> str:
    return address(10 + i)


def issue_certificates(name: str, count: int) -> None:
    folder = os.path.join(names.lab_dir(name), "pki")
    pki.authority(folder, f"nestlab-{name}-ca")
    sans = (
        "IP:" + address(1),
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


def kubeconfig_for(name: str, pki_dir: str, user: str, embed: bool) -> dict[str, Any]:
    def ref(key: str, path: str) -> dict[str, Any]:
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
                    "server": f"https://{address(1)}:{API_PORT}",
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


def write_kubeconfig(path: str, name: str, pki_dir: str, user: str, embed: bool = True) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    files.write(path, yaml.safe_dump(kubeconfig_for(name, pki_dir, user, embed), sort_keys=False), 0o600, sync=False)


def control_files(name: str, count: int) -> None:
    """The control node's kubeconfigs and start script: routes to the nodes' pods (which reach the API through the
    kubernetes Service), etcd, the API server, the controller manager, the scheduler."""
    home = names.node_dir(name, "control")
    pki_dir = os.path.join(names.lab_dir(name), "pki")
    os.makedirs(os.path.join(home, "etcd"))
    for user in ("controller-manager", "scheduler"):
        write_kubeconfig(os.path.join(home, f"{user}.kubeconfig"), name, pki_dir, user, embed=False)
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
    write(os.path.join(home, "start.sh"), "\n".join(script) + "\n")


def _apiserver_command(pki_dir: str) -> list[str]:
    """kube-apiserver on the control node's underlay address, its certificates in ``pki_dir``."""

    def p(f: str) -> str:
        return os.path.join(pki_dir, f)

    return [
        f"{BIN}/kube-apiserver",
        "--etcd-servers=http://127.0.0.1:2379",
        f"--bind-address={address(1)}",
        f"--advertise-address={address(1)}",
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


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    files.write(path, text, 0o644, sync=False)
