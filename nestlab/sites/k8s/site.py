"""Labs on Kubernetes (docs/servers.md): the same partition as on SSH servers, one pod per share.

``render`` writes and ``deploy`` creates the same objects:

* a ConfigMap ``LAB-shares`` holding each share's topology, whose tunnels point at
  ``${NESTLAB_PEER_<SHARE>}``;
* a headless Service ``LAB`` (``SHARE.LAB`` in a cluster's DNS, for clusters that have it);
* per share a privileged pod ``LAB-SHARE`` (pinned to the Kubernetes node its share is named after, if
  it is), whose start script waits for its peers' addresses (from DNS, or written into
  ``/run/nestlab-k8s/peers.env`` by ``nestlab k8s deploy`` once the pods have addresses), then runs
  ``nestlab deploy`` on its share and records the result; ready once that succeeded.  Deleting a
  pod runs ``nestlab destroy`` in it first (preStop); the lab dies with the pod in any case.

The lab's record holds the cluster's kubeconfig and namespace and each share's pod (written before
anything is created: a cleanup always knows where to look), so ``inspect``, ``exec``, ``shell``,
``capture``, ``events``, ``link set`` and ``destroy`` ask this site as they ask any other.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import __version__, names
from ...engine import state, where
from ...errors import LabError
from ...registry import SITES
from ..base import Site
from ..shares import holder, merged, pin_error, place_and_partition, running

if TYPE_CHECKING:
    from ... import seams
    from ...plan.blueprint import Blueprint
    from ...plan.partition import Partition
    from ...seams import ExecReport, Progress
    from .. import seam
    from ..seam import Deployed, Report

LABEL = "nestlab.io/lab"
SHARE = "nestlab.io/share"
NESTLAB_REF = f"localhost/nestlab:{__version__}"  # the image `nestlab k8s image` and `k8s cluster up` build
RUN = "/run/nestlab-k8s"  # inside a pod: peers.env, deploy.log, rc
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


def _dns_label(lab_name: str) -> str:
    """The lab's name as Kubernetes objects take it: lower case, '-' for any other character, at most 50."""
    name = re.sub(r"[^a-z0-9-]", "-", lab_name.lower())[:50].strip("-")
    if not name:
        raise LabError(f"lab name '{lab_name}' has no letter or digit to name Kubernetes objects after")
    return name


def share_names(lab, count: int) -> list[str]:
    """The shares: every Kubernetes node a node is pinned to (``server: node2``), then s1, s2, ... up to ``count``."""
    pinned = sorted({spec.server for spec in lab.topology.topology.nodes.values() if spec.server})
    for share in pinned:
        if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", share):
            raise LabError(f"server: {share} cannot name a Kubernetes node (lower-case letters, digits and '-')")
    generic = (f"s{i}" for i in range(1, 10_000) if f"s{i}" not in pinned)
    return pinned + [next(generic) for _ in range(max(0, count - len(pinned)))]


def _peer_var(share: str) -> str:
    return "NESTLAB_PEER_" + share.upper().replace("-", "_")


def render(
    lab, count: int, image: str, namespace: str = "default", nodes: set[str] | None = None
) -> tuple[list[dict], Partition]:
    """The manifests (ConfigMap, headless Service, one Pod per share) and the partition they carry; ``nodes``:
    the cluster's node names, which a share named after one is pinned to (default: the pinned shares)."""
    import yaml

    from ...model.schema import ServerSpec

    if count < 1:
        raise LabError("--servers must be at least 1")
    name = _dns_label(lab.name)
    shares = share_names(lab, count)
    pinned = {s for s in shares if (s in nodes if nodes is not None else not re.match(r"^s\d+$", s))}
    parts = place_and_partition(lab, {s: ServerSpec(address=s) for s in shares}, {s: "${" + _peer_var(s) + "}" for s in shares})
    labels = {"app.kubernetes.io/name": "nestlab", LABEL: name}
    files: dict[str, str] = {}  # ConfigMap key -> the file's text, for every file a share binds
    layout: dict[str, str] = {}  # ConfigMap key -> its path under /etc/nestlab
    for share in shares:
        _ship_binds(parts.shares[share].topology, files, layout)
    data = {f"{s}.yml": yaml.safe_dump(parts.shares[s].topology, sort_keys=False) for s in shares} | files
    if sum(len(v) for v in data.values()) > _CONFIGMAP_BYTES:
        raise LabError(
            f"the shares and the files they bind come to more than {_CONFIGMAP_BYTES // 1024} KiB, "
            "which a ConfigMap cannot hold: bind fewer or smaller files"
        )
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-shares", "namespace": namespace, "labels": labels},
        "data": data,
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": {LABEL: name},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "vxlan", "port": lab.topology.stitch.port, "protocol": "UDP"}],
        },
    }
    items = [{"key": f"{s}.yml", "path": f"{s}.yml"} for s in shares] + [{"key": k, "path": v} for k, v in sorted(layout.items())]
    pods = [_pod(lab.name, name, s, shares, image, namespace, labels, s in pinned, items) for s in shares]
    return [config, service, *pods], parts


_CONFIGMAP_BYTES = 1000 * 1024  # the API refuses a ConfigMap over 1 MiB


def _ship_binds(topology: dict, files: dict[str, str], layout: dict[str, str]) -> None:
    """Point every bind of a share at a copy under /etc/nestlab/files/ in the pod, each file of it put in
    ``files`` (by ConfigMap key) and ``layout`` (key -> its path in the volume): the pods do not share
    this machine's disk."""
    import hashlib

    from ...model.bind import Bind

    for spec in topology["topology"]["nodes"].values():
        binds = []
        for text in spec.get("binds") or []:
            bind = Bind(text)
            src = bind.source
            digest = hashlib.sha256(src.encode()).hexdigest()[:12]
            folder = f"files/{digest}"
            paths = [src] if os.path.isfile(src) else sorted(os.path.join(top, f) for top, _d, fs in os.walk(src) for f in fs)
            for path in paths:
                rel = os.path.basename(src) if path == src else os.path.join(os.path.basename(src), os.path.relpath(path, src))
                key = f"{digest}-{re.sub(r'[^-._a-zA-Z0-9]', '_', rel)}"
                try:
                    with open(path) as fh:
                        files[key] = fh.read()
                except (OSError, UnicodeDecodeError) as exc:
                    raise LabError(f"bind {text}: {path} cannot be sent to a pod as text ({exc})") from None
                layout[key] = f"{folder}/{rel}"
            binds.append(str(Bind.of(f"/etc/nestlab/{folder}/{os.path.basename(src)}", bind.target, bind.mode)))
        if binds:
            spec["binds"] = binds


def _pod(
    lab: str, name: str, share: str, shares: list[str], image: str, namespace: str, labels: dict, pinned: bool, items: list[dict]
) -> dict:
    resolve = " && ".join(
        f'{_peer_var(s)}=$(getent hosts {s}.{name} | cut -d" " -f1) && [ -n "${_peer_var(s)}" ]' for s in shares
    )
    script = (
        f"mkdir -p {RUN}; trap 'exit 0' TERM\n"
        f"until [ -s {RUN}/peers.env ]; do  # written by nestlab k8s deploy, or found in the cluster's DNS\n"
        f"  if {resolve}; then {{ {'; '.join(f'echo {_peer_var(s)}=${_peer_var(s)}' for s in shares)}; }} > {RUN}/peers.env; fi\n"
        f"  sleep 0.2\ndone\n"
        f"set -a; . {RUN}/peers.env; set +a\n"
        # the share's lab directory in the pod's own /run (its file's folder is a read-only ConfigMap)
        f"CLAB_LABDIR_BASE={RUN} nestlab deploy -t /etc/nestlab/{share}.yml > {RUN}/deploy.log 2>&1; echo $? > {RUN}/rc.tmp; mv {RUN}/rc.tmp {RUN}/rc\n"
        f"cat {RUN}/deploy.log\nsleep infinity & wait\n"
    )
    spec: dict = {
        "hostname": share,
        "subdomain": name,
        "terminationGracePeriodSeconds": 30,
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "nestlab",
                "image": image,
                "command": ["sh", "-c", script],
                "imagePullPolicy": "Never" if image.startswith("localhost/") else "IfNotPresent",
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "share", "mountPath": "/etc/nestlab", "readOnly": True}],
                "readinessProbe": {"exec": {"command": ["sh", "-c", f"exit $(cat {RUN}/rc)"]}, "periodSeconds": 2},
                "lifecycle": {
                    "preStop": {"exec": {"command": ["sh", "-c", f"[ ! -e {RUN}/rc ] || nestlab destroy --lab {lab}"]}}
                },
            }
        ],
        "volumes": [{"name": "share", "configMap": {"name": f"{name}-shares", "items": items}}],
    }
    if pinned:
        spec["nodeSelector"] = {"kubernetes.io/hostname": share}
    else:  # spread the lab's pods over the nodes when it can
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {LABEL: name}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-{share}", "namespace": namespace, "labels": {**labels, SHARE: share}},
        "spec": spec,
    }


@dataclass(frozen=True)
class Target:
    """Where and how ``nestlab k8s deploy`` deploys a lab: the cluster (its kubeconfig and namespace), the
    image, how many shares (default: one per Ready node, at most one per lab node), the time it may take,
    and who hears what it is doing."""

    kubeconfig: str | None = None
    namespace: str | None = None
    image: str | None = None
    count: int | None = None
    timeout: float = 300
    say: Callable[[str], None] | None = None


class Kubernetes(Site):
    name = "k8s"
    summary = "Kubernetes: a share per privileged pod, VXLAN between the pods (nestlab k8s deploy)"
    keys = {"namespace": str, "pods": dict, "placement": dict}
    target: Target = Target()

    @classmethod
    def on(cls, lab: str, target: Target) -> Kubernetes:
        """A deploy of ``lab`` to the cluster ``target`` names."""
        site = cls(lab, {})
        site.target = target
        return site

    def deploy(self, lab: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Create the lab's objects, give each pod its peers, wait until every share is deployed and every
        stitched link answers; all or nothing (a failure deletes every pod and names its cause).  Where and
        how: :meth:`on`'s target."""
        from ..seam import Deployed

        return Deployed(partition=self._deploy(lab, self.target))

    def _deploy(self, lab: Blueprint, target: Target) -> Partition:
        from ...backends.remote.kube import Cluster, ClusterError

        kubeconfig, namespace, image, count, timeout = (
            target.kubeconfig,
            target.namespace,
            target.image,
            target.count,
            target.timeout,
        )
        say = target.say or (lambda _m: None)
        deadline = time.monotonic() + timeout
        kube = Cluster(kubeconfig, namespace, timeout)
        name = _dns_label(lab.name)
        if where.read(lab.name) or state.read(lab.name):
            raise LabError(f"lab {lab.name} is already running: `nestlab destroy --lab {lab.name}` first")
        nodes = kube.nodes()
        ready = sorted(n for n, v in nodes.items() if v["ready"] and v["schedulable"])
        pinned = sorted({spec.server for spec in lab.topology.topology.nodes.values() if spec.server})
        for share in pinned:
            if share not in nodes:
                pin_error(
                    lab, share, f"names no node of the cluster at {kube.server} (its nodes: {', '.join(sorted(nodes)) or 'none'})"
                )
        if not ready:
            raise ClusterError(f"the cluster at {kube.server} has no Ready node")
        for share in pinned:
            if share not in ready:
                raise ClusterError(
                    f"node {share}, which nodes of the lab are pinned to, is not Ready or not schedulable "
                    f"({nodes[share]['why'] or 'cordoned'})"
                )
        count = count or max(len(pinned), min(len(ready), len(lab.plan.nodes)))
        manifests, parts = render(lab, count, image or NESTLAB_REF, kube.namespace, set(nodes))
        pods = {m["metadata"]["labels"][SHARE]: m["metadata"]["name"] for m in manifests if m["kind"] == "Pod"}
        self.data = {
            "kubeconfig": os.path.abspath(kubeconfig) if kubeconfig else None,
            "namespace": kube.namespace,
            "pods": pods,
            "placement": parts.placement.server_of,
        }
        selector = f"{LABEL}={name}"
        with state.locked(lab.name):
            where.write(lab.name, self.name, self.data)
            try:
                if kube.pods(selector):
                    raise ClusterError(
                        f"pods of a lab {name} already run in namespace {kube.namespace}: "
                        f"`kubectl delete pods,configmaps,services -n {kube.namespace} -l {selector}` first"
                    )
                say(f"creating {len(pods)} pods in namespace {kube.namespace}")
                for manifest in manifests:
                    kube.create(manifest)
                addresses = _wait_running(kube, pods, selector, deadline, say)
                say("deploying each share")
                _deploy_shares(kube, pods, addresses, deadline)
                say("checking the stitched links")
                _check_stitches(kube, lab, parts, pods, addresses, deadline)
            except BaseException as exc:
                try:
                    kube.delete_all(selector, time.monotonic() + 120, grace=1)
                except ClusterError as cleanup:
                    raise ClusterError(f"{exc}; and cleaning up failed: {cleanup}") from None
                import shutil

                shutil.rmtree(names.lab_dir(lab.name), ignore_errors=True)
                if isinstance(exc, LabError):
                    raise type(exc)(f"{exc}; every pod of the lab was deleted, nothing is left") from None
                raise
            running(lab)
        return parts

    def _cluster(self, timeout: float = 60):
        from ...backends.remote.kube import Cluster

        return Cluster(self.data.get("kubeconfig"), self.data["namespace"], timeout)

    def remove(self, folder_too: bool = False) -> int:
        """Delete the lab's pods (each runs nestlab destroy first) and wait until they are gone, then what is left
        of it here.  The record stays if the cluster cannot be reached, for a later try."""
        timeout = 120
        self._cluster(timeout).delete_all(f"{LABEL}={_dns_label(self.lab)}", time.monotonic() + timeout)
        where.forget(self.lab)
        return super().remove(folder_too)

    def where(self) -> str:
        return f"pods {', '.join(sorted(self.data['pods'].values()))} (namespace {self.data['namespace']})"

    def shares(self) -> dict[str, seams.Remote]:
        return {pod: PodRemote(self.data, pod) for pod in self.data["pods"].values()}

    def remote(self, ref: str) -> PodRemote:
        return PodRemote(self.data, self.data["pods"][holder(self.data["placement"], self.lab, ref)])

    def inspect(self, lab: Blueprint, only: set[str] | None = None) -> Report:
        """Every share's ``inspect``, merged, each node with its share's pod and Kubernetes node."""
        kube = self._cluster()
        on = {p.metadata.name: p.spec.node_name for p in kube.pods(f"{LABEL}={_dns_label(self.lab)}")}
        answers = _each(
            {pod: pod for pod in self.data["pods"].values()},
            lambda _s, pod: _completed(kube.exec(pod, ["nestlab", "inspect", "--lab", self.lab, "--format", "json"], 120)),
        )
        return merged(
            self.lab, answers, {p: f"pod {p}" for p in answers}, lambda pod, _n: {"server": pod, "k8s_node": on.get(pod)}, only
        )


def _completed(answer: tuple[int, str, str]) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], *answer)


class PodRemote:
    """A share's pod, run through ``kubectl exec``'s API as ``ssh`` runs a command on a server (``seams.Remote``)."""

    def __init__(self, found: dict, pod: str):
        self.found, self.name = found, pod

    def nestlab_cmd(self, *args: str) -> list[str]:
        return ["nestlab", *args]

    def popen(self, args, tty: bool = False, stream: bool = False, **kwargs) -> subprocess.Popen:
        """A local process that stands for ``args`` in the pod (its output and exit code are the command's;
        each its own exec session, a ``stream`` too); a ``stdin`` piped here is relayed (but not its end)."""
        if tty:
            raise LabError(
                f"an interactive shell on a lab on Kubernetes: kubectl exec -it -n {self.found['namespace']} {self.name} -- "
                + shlex.join(args)
            )
        relay = [
            *names.python_module("nestlab.backends.remote.kube_exec"),
            self.found.get("kubeconfig") or "",
            self.found["namespace"],
            self.name,
            *(["--stdin"] if kwargs.get("stdin") == subprocess.PIPE else []),
            "--",
            *args,
        ]
        return subprocess.Popen(relay, **kwargs)

    def run(self, args, stdin: str | None = None, timeout: float = 600, tty: bool = False) -> subprocess.CompletedProcess:
        proc = self.popen(
            args,
            tty,
            stdin=subprocess.PIPE if stdin else None,
            stdout=None if tty else subprocess.PIPE,
            stderr=None if tty else subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(stdin, timeout=timeout)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    def close(self) -> None:
        pass


SITES.register(Kubernetes)
if TYPE_CHECKING:  # mypy holds the site to the seam

    def _is_a_site(site: Kubernetes) -> seam.Site:
        return site


def _wait_running(kube, pods: dict[str, str], selector: str, deadline: float, progress) -> dict[str, str]:
    """Each share's pod address once every pod runs; a pod that cannot run is an error naming why."""
    from ...backends.remote.kube import ClusterError

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


def _cannot_run(pod) -> str | None:
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


def _pending_reason(pod) -> str:
    for c in pod.status.container_statuses or []:
        if c.state.waiting:
            return c.state.waiting.reason or "waiting"
    return pod.status.phase or "Pending"


def _each(pods: dict[str, str], work: Callable[[str, str], Any]) -> dict[str, Any]:
    """``work(share, pod)`` for every share at once; per share its result or the exception it raised."""

    def guarded(item):
        try:
            return work(*item)
        except Exception as exc:  # noqa: BLE001 - reported per share by the caller
            return exc

    with ThreadPoolExecutor(max(1, len(pods))) as pool:
        return dict(zip(pods, pool.map(guarded, pods.items())))


def _deploy_shares(kube, pods: dict[str, str], addresses: dict[str, str], deadline: float) -> None:
    from ...backends.remote.kube import ClusterError

    peers = "".join(f"{_peer_var(s)}={ip}\n" for s, ip in sorted(addresses.items()))
    script = (
        f'printf %s "$1" > {RUN}/peers.tmp && mv {RUN}/peers.tmp {RUN}/peers.env\n'
        f"while [ ! -e {RUN}/rc ]; do sleep 0.1; done\n"
        f"cat {RUN}/deploy.log >&2; exit $(cat {RUN}/rc)"
    )
    answers = _each(
        pods, lambda share, pod: kube.exec(pod, ["sh", "-c", script, "sh", peers], max(5.0, deadline - time.monotonic()))
    )
    failed = {}
    for share, answer in answers.items():
        if isinstance(answer, BaseException):
            failed[share] = str(answer)
        elif answer[0] != 0:
            lines = [ln for ln in answer[2].splitlines() if ln.strip() and not ln.startswith("note ")]
            failed[share] = " / ".join(lines[-3:]) or f"exit {answer[0]}"
    if failed:
        first = sorted(failed)[0]
        raise ClusterError(f"share {first} (pod {pods[first]}): {failed[first]}")


def _check_stitches(kube, lab, parts: Partition, pods: dict[str, str], addresses: dict[str, str], deadline: float) -> None:
    """Every cut link whose far end has an IPv4 address answers a ping across its tunnel; every pod reaches
    every other pod's address (the underlay of the rest)."""
    from ...backends.remote.kube import ClusterError

    placed = parts.placement
    probes: dict[str, list[tuple[str, str, str]]] = {s: [] for s in pods}  # share -> (node, address, what)
    cut = {frozenset(pair) for pair in placed.cut}
    for link in lab.plan.links.values():
        if frozenset((link.a.ref, link.b.ref)) not in cut:
            continue
        for near, far in ((link.a, link.b), (link.b, link.a)):
            if far.ipv4:
                probes[placed.server(near.node)].append((near.node, far.ipv4[0].split("/")[0], f"{near.ref} -> {far.ref}"))
                break
    tries = 20  # a second or so: the far side's addresses settle
    for share in pods:
        for other, ip in addresses.items():
            if other != share:
                probes[share].append(("", ip, f"pod {pods[share]} -> pod {pods[other]}"))

    def run(share: str, pod: str):
        lines = []
        for node, ip, what in probes[share]:
            ping = (
                f"ping -c1 -W0.5 {ip}"
                if not node
                else f"nestlab exec --lab {shlex.quote(lab.name)} {shlex.quote(node)} -- ping -c1 -W0.5 {ip}"
            )
            lines.append(
                f"i=0; until {ping} >/dev/null 2>&1; do i=$((i+1)); [ $i -lt {tries} ] || {{ echo {shlex.quote(what)}; break; }}; done"
            )
        if not lines:
            return 0, "", ""
        return kube.exec(pod, ["sh", "-c", "\n".join(lines)], max(5.0, deadline - time.monotonic()))

    for share, answer in _each(pods, run).items():
        if isinstance(answer, BaseException):
            raise ClusterError(f"share {share}: {answer}")
        if answer[1].strip():
            raise ClusterError(f"no answer across {answer[1].split(chr(10))[0]} (share {share}, pod {pods[share]})")
