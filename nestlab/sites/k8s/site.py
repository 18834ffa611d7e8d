"""The Kubernetes site: a lab's objects created in a cluster (manifests.py), each share deployed in its pod
and checked (rollout.py), then found, inspected and removed through the lab's record."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import names
from ...backends.remote.kube import Cluster, ClusterError
from ...backends.remote.pod import PodRemote, each
from ...engine import state, where
from ...engine.handout import handed_out
from ...errors import LabError
from ...registry import SITES
from ..elsewhere import Elsewhere
from ..seam import Deployed
from ..shares import holder, merged, running
from .manifests import LABEL, NESTLAB_REF, dns_label
from .rollout import Rollout

if TYPE_CHECKING:
    from ... import plugins
    from ...plan.blueprint import Blueprint
    from ...plan.partition import Partition
    from ...plugins import ExecReport, Progress
    from .. import seam
    from ..seam import Report


@dataclass(frozen=True)
class Target:
    """Where and how ``nestlab k8s deploy`` deploys a lab: the cluster (its kubeconfig and namespace), the
    image, how many shares (default: rollout.shares_on's), the time it may take, who hears what it is doing, and
    whether its pods are privileged (default: each in a user namespace of its own, isolation.py)."""

    kubeconfig: str | None = None
    namespace: str | None = None
    image: str | None = None
    count: int | None = None
    timeout: float = 300
    say: Callable[[str], None] | None = None
    privileged: bool = False


class Kubernetes(Elsewhere):
    name = "k8s"
    summary = "Kubernetes: a share per pod (in a user namespace of its own), VXLAN between the pods (nestlab k8s deploy)"
    keys = {"namespace": str, "pods": dict, "placement": dict}
    rank = 10

    def __init__(self, lab: str, data: dict[str, Any], options: object = None):
        super().__init__(lab, data, options)
        self.target = options if isinstance(options, Target) else Target()  # where a deploy goes

    @classmethod
    def claims(cls, blueprint: Blueprint, options: object) -> bool:
        """A lab deployed to a cluster: chosen with a :class:`Target` (``nestlab k8s deploy``)."""
        return isinstance(options, Target)

    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Create the lab's objects, give each pod its peers, wait until every share is deployed and every
        stitched link answers; all or nothing (a failure deletes every pod and names its cause).  Where and
        how: the :class:`Target` it was made with."""

        blueprint = handed_out(blueprint)  # planned here, to be placed
        return Deployed(partition=self._deploy(blueprint, self.target), blueprint=blueprint)

    def _deploy(self, blueprint: Blueprint, target: Target) -> Partition:

        kubeconfig, image, count = target.kubeconfig, target.image, target.count
        say = target.say or (lambda _m: None)
        deadline = time.monotonic() + target.timeout
        kube = Cluster(kubeconfig, target.namespace, target.timeout)
        if where.read(blueprint.name) or state.read(blueprint.name):
            raise LabError(f"lab {blueprint.name} is already running: `nestlab destroy --lab {blueprint.name}` first")
        rollout = Rollout.of(kube, blueprint, image or NESTLAB_REF, count, target.privileged)
        self.data = {
            "kubeconfig": os.path.abspath(kubeconfig) if kubeconfig else None,
            "namespace": kube.namespace,
            "pods": rollout.pods,
            "placement": rollout.parts.placement.server_of,
        }
        with state.locked(blueprint.name):
            where.write(blueprint.name, self.name, self.data)
            try:
                if kube.pods(rollout.selector):
                    raise ClusterError(
                        f"pods of a lab {dns_label(blueprint.name)} already run in namespace {kube.namespace}: "
                        f"`kubectl delete pods,configmaps,services -n {kube.namespace} -l {rollout.selector}` first"
                    )
                rollout.run(deadline, say)
            except BaseException:
                from ...backends.kernel import files

                files.remove_tree(names.lab_dir(blueprint.name))
                raise
            running(blueprint)
        return rollout.parts

    def _cluster(self, timeout: float = 60) -> Cluster:

        return Cluster(self.data.get("kubeconfig"), self.data["namespace"], timeout)

    def remove(self, folder_too: bool = False) -> int:
        """Delete the lab's pods (each runs nestlab destroy first) and wait until they are gone, then what is left
        of it here.  The record stays if the cluster cannot be reached, for a later try."""
        timeout = 120
        self._cluster(timeout).delete_all(f"{LABEL}={dns_label(self.lab)}", time.monotonic() + timeout)
        where.forget(self.lab)
        return super().remove(folder_too)

    def where(self) -> str:
        return f"pods {', '.join(sorted(self.data['pods'].values()))} (namespace {self.data['namespace']})"

    def shares(self) -> dict[str, plugins.Remote]:
        return {pod: PodRemote(self.data, pod) for pod in self.data["pods"].values()}

    def remote(self, ref: str) -> PodRemote:
        return PodRemote(self.data, self.data["pods"][holder(self.data["placement"], self.lab, ref)])

    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report:
        """Every share's ``inspect``, merged, each node with its share's pod and Kubernetes node."""
        kube = self._cluster()
        on = {p.metadata.name: p.spec.node_name for p in kube.pods(f"{LABEL}={dns_label(self.lab)}")}
        answers = each(
            {pod: pod for pod in self.data["pods"].values()},
            lambda _s, pod: _completed(kube.exec(pod, ["nestlab", "inspect", "--lab", self.lab, "--format", "json"], 120)),
        )
        return merged(
            self.lab, answers, {p: f"pod {p}" for p in answers}, lambda pod, _n: {"server": pod, "k8s_node": on.get(pod)}, only
        )


def _completed(answer: tuple[int, str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], *answer)


SITES.register(Kubernetes)
if TYPE_CHECKING:  # mypy holds the site to the seam

    def _is_a_site(site: Kubernetes) -> seam.Site:
        return site
