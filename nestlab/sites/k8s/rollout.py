"""A lab's pods brought up, one way for ``nestlab k8s deploy`` (site.py) and the operator (nestlab/operator): the
cluster's nodes checked against the lab's pins, the objects rendered (:class:`Rollout`), then created, each pod
running, then each share deployed with its peers' addresses, then every stitched link answering (:func:`bring_up`); the
first that cannot is an error naming why, after every pod of the lab was deleted."""

from __future__ import annotations

import io
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...backends.remote.kube import ClusterError
from ...backends.remote.pod import each
from ...errors import LabError
from ..shares import pin_error
from . import isolation
from .manifests import LABEL, RUN, SHARE, dns_label, peer_var, render

if TYPE_CHECKING:
    from ...backends.remote.kube import Cluster
    from ...plan.blueprint import Blueprint
    from ...plan.partition import Partition

_WAITING = {
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerError",
    "CreateContainerConfigError",
    "RunContainerError",
    "CrashLoopBackOff",
}


@dataclass(frozen=True)
class Rollout:
    """A lab's objects for a cluster (``manifests``, the ``parts`` they carry) made from its shares on the cluster's
    nodes, then brought up by :meth:`run`; between the two a caller checks or marks them (the site writes its
    record, the operator sets owners)."""

    kube: Cluster
    lab: Blueprint
    manifests: list[dict[str, Any]]
    parts: Partition
    privileged: bool = False

    @classmethod
    def of(cls, kube: Cluster, blueprint: Blueprint, image: str, count: int | None = None, privileged: bool = False) -> Rollout:
        """The objects of ``lab`` on ``kube``'s cluster in ``count`` shares (default: :func:`shares_on`'s), its pods
        running ``image``, privileged or not (manifests.render)."""
        nodes, count = shares_on(kube, blueprint, count)
        manifests, parts = render(blueprint, count, image, kube.namespace, nodes, privileged)
        return cls(kube, blueprint, manifests, parts, privileged)

    @property
    def pods(self) -> dict[str, str]:
        """Each share's pod name."""
        return {m["metadata"]["labels"][SHARE]: m["metadata"]["name"] for m in self.manifests if m["kind"] == "Pod"}

    @property
    def selector(self) -> str:
        """The label selector of every object of the lab."""
        return f"{LABEL}={dns_label(self.lab.name)}"

    def run(self, deadline: float, say: Callable[[str], None], keep_failed: bool = False) -> dict[str, str]:
        """Bring the objects up (:func:`bring_up`), answering each share's pod."""
        return bring_up(self.kube, self.lab, self.manifests, self.parts, deadline, say, self.privileged, keep_failed)


def shares_on(kube: Cluster, blueprint: Blueprint, count: int | None) -> tuple[set[str], int]:
    """The cluster's node names and how many shares the lab takes (``count``, default: one per Ready node, at
    most one per lab node; one per pin when every node is pinned); a pin to a node the cluster lacks is a file error, to one not Ready a cluster error."""

    nodes = kube.nodes()
    ready = sorted(n for n, v in nodes.items() if v["ready"] and v["schedulable"])
    pinned = sorted({spec.server for spec in blueprint.topology.topology.nodes.values() if spec.server})
    for share in pinned:
        if share not in nodes:
            pin_error(
                blueprint,
                share,
                f"names no node of the cluster at {kube.server} (its nodes: {', '.join(sorted(nodes)) or 'none'})",
            )
    if not ready:
        raise ClusterError(f"the cluster at {kube.server} has no Ready node")
    for share in pinned:
        if share not in ready:
            raise ClusterError(
                f"node {share}, which nodes of the lab are pinned to, is not Ready or not schedulable "
                f"({nodes[share]['why'] or 'cordoned'})"
            )
    unpinned = [name for name, spec in blueprint.topology.topology.nodes.items() if not spec.server]
    return set(nodes), count or (max(len(pinned), min(len(ready), len(blueprint.plan.nodes))) if unpinned else len(pinned))


def bring_up(
    kube: Cluster,
    blueprint: Blueprint,
    manifests: list[dict[str, Any]],
    parts: Partition,
    deadline: float,
    say: Callable[[str], None],
    privileged: bool = False,
    keep_failed: bool = False,
) -> dict[str, str]:
    """Create ``manifests`` (manifests.render's), wait until every share is deployed and every stitched link answers,
    and answer each share's pod; all or nothing (a failure deletes every pod of the lab and names its cause).  Unless
    ``privileged`` (as rendered), a cluster that cannot run them in user namespaces is refused before any is made, and
    each pod's uid map is checked before its share deploys.  A share whose deploy failed is named, never quoted:
    its last lines go to ``say`` before the pods are deleted, or with ``keep_failed`` the pods stay for their logs
    (the operator's way: its status is read by more than the lab's author)."""

    pods = {m["metadata"]["labels"][SHARE]: m["metadata"]["name"] for m in manifests if m["kind"] == "Pod"}
    selector = f"{LABEL}={dns_label(blueprint.name)}"
    if not privileged:
        isolation.require(kube.nodes())
    try:
        say(f"creating {len(pods)} pods in namespace {kube.namespace}")
        for manifest in manifests:
            kube.create(manifest)
        addresses = wait_running(kube, pods, selector, deadline, say)
        if not privileged:
            isolation.check_pods(kube, pods, selector)
        say("deploying each share")
        deploy_shares(kube, pods, addresses, deadline)
        say("checking the stitched links")
        check_stitches(kube, blueprint, parts, pods, addresses, deadline)
    except BaseException as exc:
        if isinstance(exc, ShareFailed) and keep_failed:
            raise ShareFailed(f"{exc}; the lab's pods are kept for their output until its next change or deletion") from None
        if isinstance(exc, ShareFailed):
            for line in exc.lines:
                say(f"pod {exc.pod}: {line}")
        try:
            kube.delete_all(selector, time.monotonic() + 120, grace=1)
        except ClusterError as cleanup:
            raise ClusterError(f"{exc}; and cleaning up failed: {cleanup}") from None
        if isinstance(exc, LabError):
            raise type(exc)(f"{exc}; every pod of the lab was deleted, nothing is left") from None
        raise
    return pods


def wait_running(
    kube: Cluster, pods: dict[str, str], selector: str, deadline: float, progress: Callable[[str], None]
) -> dict[str, str]:
    """Each share's pod address once every pod runs; a pod that cannot run is an error naming why."""

    shown = None
    while True:
        seen = {p.metadata.labels.get(SHARE): p for p in kube.pods(selector)}
        nodes = kube.nodes()
        addresses, waiting = {}, []
        for share, pod_name in sorted(pods.items()):
            pod = seen.get(share)
            if pod is None:
                raise ClusterError(f"pod {pod_name} was deleted while the lab was deploying")
            if why := _cannot_run(pod):
                raise ClusterError(f"pod {pod_name}: {why}")
            if pod.spec.node_name and not nodes.get(pod.spec.node_name, {}).get("ready"):
                raise ClusterError(
                    f"pod {pod_name}: its node {pod.spec.node_name} is not Ready "
                    f"({nodes.get(pod.spec.node_name, {}).get('why') or 'gone'})"
                )
            if pod.status.phase == "Running" and pod.status.pod_ip:
                addresses[share] = pod.status.pod_ip
            else:
                waiting.append(f"{pod_name} ({_pending_reason(pod)})")
        if not waiting:
            return addresses
        if time.monotonic() > deadline:
            raise ClusterError(f"pods not running before the timeout: {', '.join(waiting[:3])}")
        if (line := f"{len(addresses)}/{len(pods)} pods running") != shown:
            progress(line)
            shown = line
        time.sleep(0.3)


def _cannot_run(pod: Any) -> str | None:
    status = pod.status
    for cond in status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
            return f"cannot be scheduled: {cond.message}"
    if status.phase in ("Failed", "Succeeded"):
        return f"ended ({status.phase}{': ' + status.message if status.message else ''})"
    for c in status.container_statuses or []:
        if c.state.waiting and c.state.waiting.reason in _WAITING:
            return f"on node {pod.spec.node_name}: {c.state.waiting.reason}: {c.state.waiting.message or ''}".rstrip(": ")
        if c.state.terminated:
            return f"its container ended (exit {c.state.terminated.exit_code}, {c.state.terminated.reason})"
    return None


def _pending_reason(pod: Any) -> str:
    for c in pod.status.container_statuses or []:
        if c.state.waiting:
            return c.state.waiting.reason or "waiting"
    return pod.status.phase or "Pending"


def deploy_shares(kube: Cluster, pods: dict[str, str], addresses: dict[str, str], deadline: float) -> None:
    """Give every pod its peers' addresses and wait until each has deployed its share; a share that failed
    is an error naming it."""

    peers = "".join(f"{peer_var(s)}={ip}\n" for s, ip in sorted(addresses.items()))
    script = (
        f"{_from_stdin(f'{RUN}/peers.tmp')} && mv {RUN}/peers.tmp {RUN}/peers.env\n"
        f"while [ ! -e {RUN}/rc ]; do sleep 0.1; done\n"
        f"rc=$(cat {RUN}/rc); [ $rc = 0 ] || tail -c {_LAST} {RUN}/deploy.log >&2; exit $rc"
    )
    _each_deployed(kube.namespace, _fed(kube, pods, script, dict.fromkeys(pods, peers), deadline), pods)


def redeploy_shares(kube: Cluster, pods: dict[str, str], shares: dict[str, str], deadline: float) -> None:
    """Deploy each pod's share again from its new topology (``shares``: share -> text, on the exec's standard input,
    never its arguments: it holds the lab's secrets): the pod's nestlab applies the difference to what runs (a link's
    shaping changed in place, a node added); its output goes to the pod's log; a share that failed is an error."""

    script = (
        f"{_from_stdin(f'{RUN}/share.yml')} && set -a && . {RUN}/peers.env && set +a && "
        f"{{ CLAB_LABDIR_BASE={RUN} nestlab deploy -t {RUN}/share.yml > {RUN}/redeploy.log 2>&1; rc=$?; }}; "
        f"cat {RUN}/redeploy.log > /proc/1/fd/1; [ $rc = 0 ] || tail -c {_LAST} {RUN}/redeploy.log >&2; exit $rc"
    )
    _each_deployed(kube.namespace, _fed(kube, pods, script, shares, deadline), pods)


_LAST = 2048  # bytes of a failed deploy's output read back (said to `k8s deploy`'s user, never put in a status)


def _from_stdin(path: str) -> str:
    """Shell that writes the exec's standard input (``$1`` bytes: its end never arrives) to ``path``, 0400."""
    return f'rm -f {path} && (umask 277 && head -c "$1" > {path})'


def _fed(kube: Cluster, pods: dict[str, str], script: str, texts: dict[str, str], deadline: float) -> dict[str, Any]:
    """``script`` run in each share's pod, its text on its standard input (its length the one argument)."""

    def run(share: str, pod: str) -> tuple[int, str, str]:
        data = texts[share].encode()
        command = ["sh", "-c", script, "sh", str(len(data))]
        return kube.exec(pod, command, max(5.0, deadline - time.monotonic()), stdin=io.BufferedReader(io.BytesIO(data)))

    return each(pods, run)


class ShareFailed(ClusterError):
    """A share's deploy failed in its pod: ``str()`` names the share, its pod and exit code, never what it printed
    (``lines``: its last lines, for whoever deployed it)."""

    def __init__(self, message: str, pod: str = "", lines: tuple[str, ...] = ()):
        super().__init__(message)
        self.pod, self.lines = pod, lines


def _each_deployed(namespace: str, answers: dict[str, Any], pods: dict[str, str]) -> None:
    """The first share whose deploy failed, as an error naming it, its pod and exit code, and where its output is."""
    failed: dict[str, tuple[str, tuple[str, ...]]] = {}
    for share, answer in answers.items():
        if isinstance(answer, BaseException):
            failed[share] = (str(answer), ())
        elif answer[0] != 0:
            lines = tuple(ln for ln in answer[2].splitlines() if ln.strip() and not ln.startswith("note "))[-3:]
            failed[share] = (
                f"its deploy failed (exit {answer[0]}): its output is in the pod's log "
                f"(nestlab k8s logs {pods[share].removesuffix('-' + share)} -n {namespace}, "
                f"or kubectl logs -n {namespace} {pods[share]})",
                lines,
            )
    if failed:
        first = sorted(failed)[0]
        raise ShareFailed(f"share {first} (pod {pods[first]}): {failed[first][0]}", pods[first], failed[first][1])


def _probes(
    blueprint: Blueprint, parts: Partition, pods: dict[str, str], addresses: dict[str, str]
) -> dict[str, list[tuple[str, str, str]]]:
    """What each share pings, as (node, address, what it shows): the far end of each cut link from its near node, and
    every other pod from the pod itself (node "")."""
    placed = parts.placement
    probes: dict[str, list[tuple[str, str, str]]] = {s: [] for s in pods}
    cut = {frozenset(pair) for pair in placed.cut}
    for link in blueprint.plan.links.values():
        if frozenset((link.a.ref, link.b.ref)) not in cut:
            continue
        for near, far in ((link.a, link.b), (link.b, link.a)):
            if far.ipv4:
                probes[placed.server(near.node)].append((near.node, far.ipv4[0].split("/")[0], f"{near.ref} -> {far.ref}"))
                break
    for share in pods:
        for other, ip in addresses.items():
            if other != share:
                probes[share].append(("", ip, f"pod {pods[share]} -> pod {pods[other]}"))
    return probes


def check_stitches(
    kube: Cluster, blueprint: Blueprint, parts: Partition, pods: dict[str, str], addresses: dict[str, str], deadline: float
) -> None:
    """Every cut link whose far end has an IPv4 address answers a ping across its tunnel; every pod reaches
    every other pod's address (the underlay of the rest)."""

    probes = _probes(blueprint, parts, pods, addresses)
    tries = 20  # a second or so: the far side's addresses settle

    def run(share: str, pod: str) -> tuple[int, str, str]:
        lines = []
        for node, ip, what in probes[share]:
            ping = (
                f"ping -c1 -W0.5 {ip}"
                if not node
                else f"nestlab exec --lab {shlex.quote(blueprint.name)} {shlex.quote(node)} -- ping -c1 -W0.5 {ip}"
            )
            lines.append(
                f"i=0; until {ping} >/dev/null 2>&1; do i=$((i+1)); [ $i -lt {tries} ] || {{ echo {shlex.quote(what)}; break; }}; done"
            )
        if not lines:
            return 0, "", ""
        return kube.exec(pod, ["sh", "-c", "\n".join(lines)], max(5.0, deadline - time.monotonic()))

    for share, answer in each(pods, run).items():
        if isinstance(answer, BaseException):
            raise ClusterError(f"share {share}: {answer}")
        said = answer[1].strip().split("\n")[0]
        if said:  # one of the probes' own names, never the pod's words
            what = next((w for _n, _ip, w in probes[share] if w == said), "a stitched link (the pod said otherwise)")
            raise ClusterError(f"no answer across {what} (share {share}, pod {pods[share]})")
