"""``nestlab k8s render``: the same split as on SSH servers, as Kubernetes manifests.

Per share, one privileged pod running nestlab on its share (from a ConfigMap); the pods find each
other through a headless Service (``SHARE.LAB`` in DNS) and the share's VXLAN tunnels point at
``${NESTLAB_PEER_<share>}``, which the pod's start script fills in from DNS before deploying.
Deleting a pod runs ``nestlab destroy`` in it first (a preStop hook).  CI validates these manifests
against the Kubernetes API models; it does not run a cluster.
"""

from __future__ import annotations

import re

import yaml

from ..errors import LabError
from ..model.schema import ServerSpec
from .multi import Split, split

LABEL = "nestlab.io/lab"


def render(lab, count: int, image: str, namespace: str = "default") -> tuple[list[dict], Split]:
    """The manifests (ConfigMap, headless Service, one Pod per share) and the split they carry."""
    if count < 1:
        raise LabError("--servers must be at least 1")
    if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", lab.name.lower()) or len(lab.name) > 50:
        raise LabError(f"lab name '{lab.name}' must be a DNS label (letters, digits, '-') to name Kubernetes objects")
    shares = [f"s{i}" for i in range(1, count + 1)]
    servers = {s: ServerSpec(address=s) for s in shares}
    parts = split(lab, servers, {s: "${" + _peer_var(s) + "}" for s in shares})
    name = lab.name.lower()
    labels = {"app.kubernetes.io/name": "nestlab", LABEL: name}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-shares", "namespace": namespace, "labels": labels},
              "data": {f"{s}.yml": yaml.safe_dump(parts.shares[s].topology, sort_keys=False) for s in shares}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "spec": {"clusterIP": "None", "selector": {LABEL: name}, "publishNotReadyAddresses": True,
                        "ports": [{"name": "vxlan", "port": lab.topology.stitch.port, "protocol": "UDP"}]}}
    pods = [_pod(lab.name, name, s, shares, image, namespace, labels) for s in shares]
    return [config, service, *pods], parts


def _peer_var(share: str) -> str:
    return f"NESTLAB_PEER_{share.upper()}"


def _pod(lab: str, name: str, share: str, shares: list[str], image: str, namespace: str, labels: dict) -> dict:
    resolve = "".join(f'until {_peer_var(s)}=$(getent hosts {s}.{name} | cut -d" " -f1) && [ -n "${_peer_var(s)}" ]; do sleep 1; done\n'
                      f"export {_peer_var(s)}\n" for s in shares)
    script = f"set -e\n{resolve}nestlab deploy -t /etc/nestlab/{share}.yml\nexec sleep infinity\n"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-{share}", "namespace": namespace, "labels": {**labels, "nestlab.io/share": share}},
        "spec": {
            "hostname": share, "subdomain": name, "terminationGracePeriodSeconds": 60, "restartPolicy": "Never",
            "containers": [{
                "name": "nestlab", "image": image, "command": ["sh", "-c", script],
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "share", "mountPath": "/etc/nestlab", "readOnly": True}],
                "readinessProbe": {"exec": {"command": ["nestlab", "inspect", "--lab", lab, "--format", "json"]}, "periodSeconds": 5},
                "lifecycle": {"preStop": {"exec": {"command": ["nestlab", "destroy", "--lab", lab]}}},
            }],
            "volumes": [{"name": "share", "configMap": {"name": f"{name}-shares"}}],
        },
    }
