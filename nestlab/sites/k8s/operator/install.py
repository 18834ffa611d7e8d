"""What ``nestlab k8s operator install`` puts in a cluster, and ``uninstall`` takes out: the NestLab CRD, a
namespace for the operator with its ServiceAccount, a ClusterRole of exactly what it does (below) bound to it,
and a Deployment of one operator pod from the image the labs' pods run."""

from __future__ import annotations

import time
from typing import Any

from ....backends.remote.kube import Cluster, ClusterError
from .resource import GROUP, PLURAL, VERSION, crd

NAME = "nestlab-operator"
LABELS = {"app.kubernetes.io/name": "nestlab", "app.kubernetes.io/component": "operator"}

# Least privilege: what the reconciler calls, and nothing else.  Labs live in any namespace, so the rules are a
# ClusterRole's; nodes are read to place pinned shares and to tell a lost node.
RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "create", "delete"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "create", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
]


def objects(namespace: str, image: str, deployment: bool = True) -> list[dict[str, Any]]:
    """The CRD, then the operator's namespace, account, role, binding and (with ``deployment``) its Deployment."""
    meta = {"labels": LABELS}
    made: list[dict[str, Any]] = [
        crd(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, **meta}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME, **meta}, "rules": RULES},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]
    if deployment:
        made.append(_deployment(namespace, image))
    return made


def _deployment(namespace: str, image: str) -> dict[str, Any]:
    pod = {
        "serviceAccountName": NAME,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "operator",
                "image": image,
                "imagePullPolicy": "Never" if image.startswith("localhost/") else "IfNotPresent",
                "command": ["nestlab", "k8s", "operator", "run", "--image", image],
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            }
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": LABELS},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},  # one operator at a time: no two reconcile a lab at once
            "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": LABELS}, "spec": pod},
        },
    }


def install(kube: Cluster, namespace: str, image: str, deadline: float, deployment: bool = True) -> list[str]:
    """Apply every object (server-side: installing again updates them), and wait until the API serves NestLabs
    (the CRD Established); what was applied, as ``Kind/name``."""
    done = []
    for obj in objects(namespace, image, deployment):
        kube.apply(obj)
        done.append(f"{obj['kind']}/{obj['metadata']['name']}")
    while not _established(kube.read(crd())):
        if time.monotonic() > deadline:
            raise ClusterError(f"the API server did not serve {PLURAL}.{GROUP} before the timeout")
        time.sleep(0.2)
    return done


def _established(found: dict[str, Any] | None) -> bool:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def uninstall(kube: Cluster, namespace: str, deadline: float) -> list[str]:
    """Delete every object install makes, the CRD last, and wait until each is gone; what was there, as
    ``Kind/name``.  Refused while a NestLab is left: its pods need the operator to go (delete the labs first)."""
    from kubernetes import client

    if kube.read(crd()) is not None:
        labs = kube.call("list NestLabs", client.CustomObjectsApi(kube.api).list_cluster_custom_object, GROUP, VERSION, PLURAL)
        if left := [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in labs["items"]]:
            raise ClusterError(
                f"{len(left)} NestLabs are left ({', '.join(left[:3])}): `kubectl delete nestlabs --all -A` first "
                "(the operator removes their pods), then uninstall"
            )
    gone = []
    for obj in reversed(objects(namespace, "", True)):
        if kube.remove(obj):
            gone.append(f"{obj['kind']}/{obj['metadata']['name']}")
        while kube.read(obj) is not None:  # a namespace, a CRD: terminating a while
            if time.monotonic() > deadline:
                raise ClusterError(f"{obj['kind']} {obj['metadata']['name']} still there after the timeout")
            time.sleep(0.3)
    return gone
