"""A lab's pods' logs (``nestlab k8s logs``): what each share's deploy and every change since printed, which no
status or event quotes (a pod's output is its author's: docs/security.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import LabError
from .manifests import LABEL, dns_label

if TYPE_CHECKING:
    from ...backends.remote.kube import Cluster

MAX_BYTES = 1024 * 1024  # of one pod's log


def pod_logs(kube: Cluster, lab: str, tail: int) -> list[tuple[str, str]]:
    """Each pod of ``lab`` in ``kube``'s namespace and the last ``tail`` lines of its log (at most :data:`MAX_BYTES`)."""
    pods = sorted(p.metadata.name for p in kube.pods(f"{LABEL}={dns_label(lab)}"))
    if not pods:
        raise LabError(f"no pod of a lab {lab} in namespace {kube.namespace} (a failed lab's pods go with its next change)")
    return [
        (
            pod,
            kube.call(
                f"read the log of pod {pod}",
                kube.core.read_namespaced_pod_log,
                pod,
                kube.namespace,
                tail_lines=tail,
                limit_bytes=MAX_BYTES,
            ),
        )
        for pod in pods
    ]
