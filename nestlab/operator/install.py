"""What ``nestlab k8s operator install`` puts in a cluster, and ``uninstall`` takes out: the NestLab CRD, a
namespace for the operator with its ServiceAccount, a ClusterRole of what it does cluster-wide (below) bound to
it, and a Deployment of one operator pod from the image the labs' pods run; and what ``operator allow NS`` puts
in a namespace labs may run in (a Role of what the operator does there, bound to it), ``disallow`` takes out."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from ..backends.remote.kube import Cluster, ClusterError
from .policy import Policy
from .resource import GROUP, PLURAL, VERSION, crd

NAME = "nestlab-operator"
LABELS = {"app.kubernetes.io/name": "nestlab", "app.kubernetes.io/component": "operator"}

# Least privilege, cluster-wide: NestLabs (watched in every namespace, their finalizer and status written), events
# on them (a NestLab in a namespace nobody allowed is told so), nodes (read to place pinned shares and to tell a
# lost node), and the RoleBinding ``allow`` makes, by its name alone: how the operator knows a namespace is allowed.
RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["get"], "resourceNames": [NAME]},
]
# In each allowed namespace alone: a lab's pods, exec in them, its Secret and Service; the ConfigMaps and Secrets
# its NestLab names (valueFrom) read.
LAB_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "create", "delete"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "delete"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "create", "delete"]},
]
RBAC = "rbac.authorization.k8s.io/v1"


def objects(namespace: str, image: str, deployment: bool = True, policy: Policy = Policy()) -> list[dict[str, Any]]:
    """The CRD, then the operator's namespace, account, role, binding and (with ``deployment``) its Deployment."""
    meta = {"labels": LABELS}
    made: list[dict[str, Any]] = [
        crd(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, **meta}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace, **meta}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": NAME, **meta}, "rules": RULES},
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]
    if deployment:
        made.append(_deployment(namespace, image, policy))
    return made


def role(namespace: str) -> dict[str, Any]:
    """The operator's rights in a namespace labs may run in."""
    return {
        "apiVersion": RBAC,
        "kind": "Role",
        "metadata": {"name": NAME, "namespace": namespace, "labels": LABELS},
        "rules": LAB_RULES,
    }


def binding(namespace: str, operator_namespace: str) -> dict[str, Any]:
    """:func:`role` bound to the operator's account (of ``operator_namespace``); the operator reads it to know."""
    return {
        "apiVersion": RBAC,
        "kind": "RoleBinding",
        "metadata": {"name": NAME, "namespace": namespace, "labels": LABELS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": operator_namespace}],
    }


def allow(kube: Cluster, namespace: str, operator_namespace: str) -> list[str]:
    """Let labs run in ``namespace``: the operator's Role and RoleBinding there (applied: again is the same), and
    every NestLab already there looked at again (an annotation: a watch event); what was applied."""
    if kube.read({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}) is None:
        raise ClusterError(f"no namespace {namespace}: kubectl create namespace {namespace} first")
    done = []
    for obj in (role(namespace), binding(namespace, operator_namespace)):
        kube.apply(obj)
        done.append(f"{obj['kind']}/{obj['metadata']['name']} in namespace {namespace}")
    custom = client.CustomObjectsApi(kube.api)
    if kube.read(crd()) is not None:
        now = {"metadata": {"annotations": {f"{GROUP}/allowed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}}
        for item in kube.call("list NestLabs", custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL)["items"]:
            kube.call(
                "touch a NestLab",
                custom.patch_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                item["metadata"]["name"],
                now,
            )
    return done


def disallow(kube: Cluster, namespace: str) -> list[str]:
    """Take the operator's rights in ``namespace`` away; refused while a NestLab is left there (its pods need the
    operator to go); what was removed."""
    if kube.read(crd()) is not None:
        listed = kube.call(
            "list NestLabs", client.CustomObjectsApi(kube.api).list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL
        )
        if left := [i["metadata"]["name"] for i in listed["items"]]:
            raise ClusterError(
                f"{len(left)} NestLabs are left in namespace {namespace} ({', '.join(left[:3])}): "
                f"`kubectl delete nestlabs --all -n {namespace}` first (the operator removes their pods), then disallow"
            )
    return [f"{o['kind']}/{NAME} in namespace {namespace}" for o in (binding(namespace, ""), role(namespace)) if kube.remove(o)]


def allowed(kube: Cluster) -> list[str]:
    """The namespaces labs may run in (those with the operator's RoleBinding)."""
    rbac = client.RbacAuthorizationV1Api(kube.api)
    found = kube.call("list role bindings", rbac.list_role_binding_for_all_namespaces, field_selector=f"metadata.name={NAME}")
    return sorted(b.metadata.namespace for b in found.items)


def _deployment(namespace: str, image: str, policy: Policy) -> dict[str, Any]:
    pod = {
        "serviceAccountName": NAME,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "operator",
                "image": image,
                "imagePullPolicy": "Never" if image.startswith("localhost/") else "IfNotPresent",
                "command": ["nestlab", "k8s", "operator", "run", "--image", image, *policy.args()],
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


def install(
    kube: Cluster,
    namespace: str,
    image: str,
    deadline: float,
    deployment: bool = True,
    allowing: tuple[str, ...] = (),
    policy: Policy = Policy(),
) -> list[str]:
    """Apply every object (server-side: installing again updates them), wait until the API serves NestLabs (the
    CRD Established), then allow labs in each namespace of ``allowing``; what was applied, as ``Kind/name``."""
    done = []
    for obj in objects(namespace, image, deployment, policy):
        kube.apply(obj)
        done.append(f"{obj['kind']}/{obj['metadata']['name']}")
    while not _established(kube.read(crd())):
        if time.monotonic() > deadline:
            raise ClusterError(f"the API server did not serve {PLURAL}.{GROUP} before the timeout")
        time.sleep(0.2)
    return done + [made for allowed_ns in allowing for made in allow(kube, allowed_ns, namespace)]


def _established(found: dict[str, Any] | None) -> bool:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def uninstall(kube: Cluster, namespace: str, deadline: float) -> list[str]:
    """Delete every object install makes, the CRD last, and wait until each is gone; what was there, as
    ``Kind/name``.  Refused while a NestLab is left: its pods need the operator to go (delete the labs first)."""
    if kube.read(crd()) is not None:
        labs = kube.call("list NestLabs", client.CustomObjectsApi(kube.api).list_cluster_custom_object, GROUP, VERSION, PLURAL)
        if left := [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in labs["items"]]:
            raise ClusterError(
                f"{len(left)} NestLabs are left ({', '.join(left[:3])}): `kubectl delete nestlabs --all -A` first "
                "(the operator removes their pods), then uninstall"
            )
    gone = [done for allowed_ns in allowed(kube) for done in disallow(kube, allowed_ns)]
    for obj in reversed(objects(namespace, "", True)):
        if kube.remove(obj):
            gone.append(f"{obj['kind']}/{obj['metadata']['name']}")
        while kube.read(obj) is not None:  # a namespace, a CRD: terminating a while
            if time.monotonic() > deadline:
                raise ClusterError(f"{obj['kind']} {obj['metadata']['name']} still there after the timeout")
            time.sleep(0.3)
    return gone
