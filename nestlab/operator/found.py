"""An operator's lab used from a workstation (``nestlab exec/inspect/... --lab NAME --kubeconfig KC``): its NestLab read
from the cluster, once, into the lab it asks for and the Kubernetes site it runs at (which pod holds which node: its
status), handed to the :class:`~nestlab.lab.lab.Lab` together (``Lab.at``): nothing is written on the workstation."""

from __future__ import annotations

import datetime
import os
from typing import Any

from ..backends.remote.kube import Cluster, ClusterError
from ..errors import LabError
from ..lab.lab import Lab
from ..sites.k8s.site import Kubernetes
from .inputs import fetcher
from .resource import GROUP, KIND, PLURAL, VERSION, blueprint


def found_lab(name: str, kubeconfig: str | None = None, namespace: str | None = None) -> Lab:
    """The lab NestLab ``name`` asks for, at the Kubernetes site its pods (from its status) make, last made or changed
    when its Ready condition says; refused unless it is Ready, saying its phase, or when ``namespace`` (the
    kubeconfig's, else default) has no NestLab of that name, listing those it has.  ``kubeconfig``: the cluster's
    (None: $KUBECONFIG, else ~/.kube/config)."""
    kube = Cluster(kubeconfig, namespace)
    labs = {obj["metadata"]["name"]: obj for obj in _listed(kube)}
    if name not in labs:
        have = ", ".join(sorted(labs)) or "none"
        raise LabError(f"no NestLab {name} in namespace {kube.namespace} (its NestLabs: {have}); --namespace NS names another")
    obj = labs[name]
    status: dict[str, Any] = obj.get("status") or {}
    phase = status.get("phase")
    if phase != "Ready":
        why = f": {status['message']}" if status.get("message") else ""
        said = f"is {phase}{why}" if phase else "has no status yet: is an operator running? (nestlab k8s operator install)"
        raise LabError(f"NestLab {kube.namespace}/{name} {said}")
    placement = {node: held["pod"] for node, held in (status.get("nodes") or {}).items()}
    site = Kubernetes(
        name,
        {
            "kubeconfig": os.path.abspath(kubeconfig) if kubeconfig else None,
            "namespace": kube.namespace,
            "pods": {pod: pod for pod in sorted(set(placement.values()))},  # each pod its own share's name
            "placement": placement,
        },
    )
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    stamp = ready.get("lastTransitionTime") or obj["metadata"]["creationTimestamp"]
    since = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return Lab.at(blueprint(obj, fetcher(kube)), site, since.timestamp())  # its files read as the workstation's user may


def _listed(kube: Cluster) -> list[dict[str, Any]]:
    """Every NestLab of ``kube``'s namespace; a cluster without the resource kind says how to install it."""
    from kubernetes import client

    custom = client.CustomObjectsApi(kube.api)
    try:
        listed = kube.call(
            f"list {KIND}s in namespace {kube.namespace}",
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            kube.namespace,
            PLURAL,
        )
    except ClusterError as exc:
        if exc.status == 404:
            raise ClusterError(
                f"the cluster at {kube.server} serves no {KIND}s ({PLURAL}.{GROUP}): nestlab k8s operator install"
            ) from None
        raise
    items: list[dict[str, Any]] = listed["items"]
    return items
