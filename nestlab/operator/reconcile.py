"""One NestLab brought to what it asks, from whatever state it is found in (level-triggered: the operator may
have been down, or have died half-way): deleted (its pods and objects removed, then its finalizer), invalid
(Failed, naming the field), Ready for an older generation (changed in place through its pods when the change keeps
every node in its pod, else made anew), half-deployed (made anew: every pod of the lab deleted first), or Ready
(its pods looked at: Degraded when one is lost).  Status and events say each step."""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import re
import time
from collections.abc import Callable
from typing import Any

from ..backends.remote.kube import Cluster
from ..backends.remote.pod import each
from ..errors import LabError
from ..model import files
from ..model.errors import TopologyError
from ..plan.blueprint import Blueprint
from ..sites.k8s.manifests import LABEL, dns_label
from ..sites.k8s.rollout import Rollout, redeploy_shares
from .inputs import fetcher
from .install import binding
from .policy import Policy
from .resource import API_VERSION, FINALIZER, GROUP, KIND, PLURAL, VERSION, InvalidSpec, read

HEALTH_EVERY = 20.0  # seconds between looks at a Ready lab's pods
NOT_ALLOWED_EVERY = 30.0  # seconds between looks at a NestLab in a namespace nobody allowed
RETRIED = ("NotAllowed", "ReconcileError")  # Failed for these reasons: looked at again though its spec is the same
Say = Callable[[str], None]


class Reconciler:
    """Reconciles NestLabs on ``kube``'s cluster, deploying with ``image`` in at most ``timeout`` seconds a lab."""

    def __init__(self, kube: Cluster, image: str, timeout: float, say: Say, policy: Policy = Policy()) -> None:
        from kubernetes import client

        self.kube, self.image, self.timeout, self.say = kube, image, timeout, say
        self.policy = policy
        self.node_selector = dict(p.split("=", 1) for p in policy.node_selector)  # the nodes labs may run on
        self.custom = client.CustomObjectsApi(kube.api)

    def reconcile(self, namespace: str, name: str) -> float | None:
        """Bring NestLab ``namespace/name`` to its spec; seconds until it wants another look (None: on its next change)."""
        obj = self._get(namespace, name)
        if obj is None:
            return None
        kube = self.kube.scoped(namespace)
        meta = obj["metadata"]
        allowed = self._allowed(kube)
        if meta.get("deletionTimestamp"):
            if FINALIZER in meta.get("finalizers", []):
                self._delete(kube, obj, allowed)
            return None
        if not allowed:
            return self._not_allowed(obj)
        if FINALIZER not in meta.get("finalizers", []):
            self._patch(obj, {"metadata": {"finalizers": [*meta.get("finalizers", []), FINALIZER]}})
            self._status(obj, "Pending", "accepted", [])
        status = obj.get("status") or {}
        if status.get("observedGeneration") == meta["generation"] and status.get("phase") in ("Ready", "Failed"):
            if _reason(status) not in RETRIED:
                return self._health(kube, obj) if status["phase"] == "Ready" else None
        self._deploy(kube, obj)
        return HEALTH_EVERY

    def failed(self, namespace: str, name: str, message: str) -> None:
        """NestLab ``namespace/name`` Failed (ReconcileError: tried again later) by what its reconcile raised."""
        obj = self._get(namespace, name)
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            self._status(obj, "Failed", message, [_condition("Ready", False, "ReconcileError", message)])

    # -- the steps ------------------------------------------------------------------------------
    def _allowed(self, kube: Cluster) -> bool:
        """Whether an administrator allowed labs in ``kube``'s namespace (``operator allow`` made its RoleBinding)."""
        return kube.read(binding(kube.namespace, "")) is not None

    def _not_allowed(self, obj: dict[str, Any]) -> float:
        """A NestLab in a namespace nobody allowed: nothing made, its status saying how to allow it; looked at again
        in :data:`NOT_ALLOWED_EVERY` seconds (and when ``allow`` touches it)."""
        status, namespace = obj.get("status") or {}, obj["metadata"]["namespace"]
        if _reason(status) != "NotAllowed" or status.get("observedGeneration") != obj["metadata"]["generation"]:
            message = (
                f"namespace {namespace} is not allowed labs, so nothing is made: "
                f"an administrator allows it with `nestlab k8s operator allow {namespace}`"
            )
            self._fail(obj, "NotAllowed", message)
        return NOT_ALLOWED_EVERY

    def _deploy(self, kube: Cluster, obj: dict[str, Any]) -> None:
        key = _key(obj)
        previous = obj.get("status") or {}
        try:
            lab, given = read(obj, fetcher(kube, self.policy.secret_types))
        except InvalidSpec as exc:
            self._fail(obj, "InvalidSpec", str(exc))
            return
        started = time.monotonic()
        self._status(obj, "Deploying", f"deploying {len(lab.plan.nodes)} nodes", [], count=len(lab.plan.nodes))
        self._event(obj, "Deploying", f"deploying generation {obj['metadata']['generation']}")
        try:
            if why := self._not_for_labs(kube, lab):
                self._fail(obj, "NotForLabs", why)
                return
            with files.only(given):  # the resource's files, never the operator's
                rollout = Rollout.of(kube, lab, self.image)
            for manifest in rollout.manifests:  # the lab's objects go with the resource, even without this operator
                manifest["metadata"]["ownerReferences"] = [_owner(obj)]
                if manifest["kind"] == "Pod" and self.node_selector:
                    manifest["spec"]["nodeSelector"] = {**self.node_selector, **manifest["spec"].get("nodeSelector", {})}
            pods = self._in_place(kube, previous, rollout, started + self.timeout) if previous.get("phase") == "Ready" else None
            if pods is not None:
                self.say(f"{key}: changed in place")
            else:
                if kube.pods(rollout.selector):  # a deploy cut short, or a change that moves nodes: the lab is made anew
                    self.say(f"{key}: removing the pods of an earlier deploy")
                    kube.delete_all(rollout.selector, started + self.timeout, grace=1)
                pods = rollout.run(started + self.timeout, lambda m: self.say(f"{key}: {m}"), keep_failed=True)
        except TopologyError as exc:  # a pin to a node the cluster lacks
            self._fail(obj, "InvalidSpec", str(InvalidSpec.of(exc)))
            return
        except LabError as exc:
            self._fail(obj, "DeployFailed", str(exc))
            return
        placed = {node: pods[rollout.parts.placement.server(node)] for node in lab.plan.nodes}
        message = f"{len(placed)} nodes in {len(pods)} pods in {time.monotonic() - started:.1f} s"
        nodes = self._nodes(kube, obj, placed, _addresses(kube, lab.name, set(pods.values()), set(placed)))
        self._status(obj, "Ready", message, [_condition("Ready", True, "Deployed", message)], nodes, len(placed))
        self._event(obj, "Ready", message)
        self.say(f"{key}: Ready, {message}")

    def _not_for_labs(self, kube: Cluster, blueprint: Blueprint) -> str | None:
        """Why a node's ``server:`` names a cluster node that is not for labs (tainted, or outside the administrator's
        node selector), or None."""
        nodes = kube.nodes()
        for name, spec in sorted(blueprint.topology.topology.nodes.items()):
            found = nodes.get(spec.server or "")
            if found is None:
                continue
            tainted = [  # an administrator's taints; the node's conditions (node.kubernetes.io/not-ready ...) come and go
                t
                for t in found["taints"]
                if t.endswith((":NoSchedule", ":NoExecute")) and not t.startswith("node.kubernetes.io/")
            ]
            outside = {k: v for k, v in self.node_selector.items() if found["labels"].get(k) != v}
            if tainted or outside:
                why = (
                    f"tainted {', '.join(tainted)}"
                    if tainted
                    else f"not labelled {', '.join(f'{k}={v}' for k, v in outside.items())}"
                )
                return f"spec.topology.nodes.{name}.server: node {spec.server} is not for labs ({why}): pin the node to another"
        return None

    def _in_place(self, kube: Cluster, previous: dict[str, Any], rollout: Rollout, deadline: float) -> dict[str, str] | None:
        """A Ready lab changed through its running pods, each whose share changed deploying it again (its nestlab
        applies the difference: a link's new rate reshaped, a node added made, nothing else touched); the pods, or
        None when the change needs other pods or moves a node to another (the lab is then made anew)."""
        pods = rollout.pods
        was = {node: v["pod"] for node, v in (previous.get("nodes") or {}).items()}
        now = {node: pods[share] for node, share in rollout.parts.placement.server_of.items()}
        config = next(m for m in rollout.manifests if m["kind"] == "Secret")
        running = (kube.read(config) or {}).get("data") or {}
        live = [p for p in kube.pods(f"{LABEL}={config['metadata']['labels'][LABEL]}") if p.status.phase == "Running"]
        alive = {p.metadata.name for p in live}
        if alive != set(pods.values()) or not set(was.values()) <= alive or any(now.get(n, p) != p for n, p in was.items()):
            return None
        if any(p.spec.host_users is not False for p in live):  # a pod of an older nestlab, privileged: made anew
            return None
        if set(running) != set(config["data"]):
            return None
        changed = {
            s: base64.b64decode(config["data"][f"{s}.yml"]).decode()
            for s in pods
            if running[f"{s}.yml"] != config["data"][f"{s}.yml"]
        }
        redeploy_shares(kube, {s: pods[s] for s in changed}, changed, deadline)
        kube.apply(config)
        return pods

    def _health(self, kube: Cluster, obj: dict[str, Any]) -> float:
        """A Ready lab's pods, looked at: Degraded (naming the first pod lost or not Ready) or not."""
        was = obj["status"].get("nodes") or {}
        nodes = self._nodes(kube, obj, {n: v["pod"] for n, v in was.items()}, {n: v.get("addresses", {}) for n, v in was.items()})
        lost = sorted({f"pod {v['pod']}: {v['state']}" for v in nodes.values() if v["state"] != "running"})
        conditions = {c["type"]: c for c in obj["status"].get("conditions", [])}
        degraded = _condition("Degraded", bool(lost), "PodLost" if lost else "AllRunning", lost[0] if lost else "every pod runs")
        if conditions.get("Degraded", {}).get("status", "False") != degraded["status"]:
            ready = conditions.get("Ready") or _condition("Ready", True, "Deployed", obj["status"].get("message", ""))
            self._status(obj, "Ready", obj["status"].get("message", ""), [ready, degraded], nodes, len(nodes))
            self._event(obj, "Degraded" if lost else "Recovered", degraded["message"], warning=bool(lost))
        return HEALTH_EVERY

    def _delete(self, kube: Cluster, obj: dict[str, Any], allowed: bool) -> None:
        self._status(obj, "Deleting", "deleting every pod and object of the lab", obj.get("status", {}).get("conditions", []))
        self._event(obj, "Deleting", "deleting every pod and object of the lab")
        if allowed:  # else the operator made nothing there (operator disallow waits until no NestLab is left)
            kube.delete_all(f"{LABEL}={dns_label(obj['metadata']['name'])}", time.monotonic() + self.timeout)
        left = [f for f in obj["metadata"]["finalizers"] if f != FINALIZER]
        self._patch(obj, {"metadata": {"finalizers": left, "resourceVersion": obj["metadata"]["resourceVersion"]}})
        self.say(f"{_key(obj)}: deleted")

    def _fail(self, obj: dict[str, Any], reason: str, message: str) -> None:
        self._status(obj, "Failed", message, [_condition("Ready", False, reason, message)])
        self._event(obj, reason, message, warning=True)
        self.say(f"{_key(obj)}: Failed ({reason}): {message}")

    # -- the API --------------------------------------------------------------------------------
    def _nodes(
        self, kube: Cluster, obj: dict[str, Any], placed: dict[str, str], addresses: dict[str, dict[str, list[str]]]
    ) -> dict[str, dict[str, Any]]:
        """Each lab node's pod, the cluster node it runs on, its state (running, or why its pod is not) and its
        ``addresses`` (by interface)."""
        found = {p.metadata.name: p for p in kube.pods(f"{LABEL}={dns_label(obj['metadata']['name'])}")}
        ready = {n for n, v in kube.nodes().items() if v["ready"]}
        out = {}
        for node, pod_name in placed.items():
            pod = found.get(pod_name)
            where = (pod.spec.node_name or "") if pod else ""
            if pod is None:
                state = "pod gone"
            elif where and where not in ready:
                state = f"node {where} not Ready"
            elif any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
                state = "running"
            else:
                state = (pod.status.phase or "Pending").lower()
            out[node] = {"pod": pod_name, "clusterNode": where, "state": state, "addresses": addresses.get(node, {})}
        return out

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def _patch(self, obj: dict[str, Any], body: dict[str, Any]) -> None:
        meta = obj["metadata"]
        obj.update(
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body, _request_timeout=30
            )
        )

    def _status(
        self,
        obj: dict[str, Any],
        phase: str,
        message: str,
        conditions: list[dict[str, Any]],
        nodes: dict[str, dict[str, Any]] | None = None,
        count: int | None = None,
    ) -> None:
        meta = obj["metadata"]
        status: dict[str, Any] = {
            "phase": phase,
            "message": message[:2000],
            "observedGeneration": meta["generation"],
            "conditions": [{**c, "observedGeneration": meta["generation"]} for c in conditions],
            "nodes": nodes,  # None: removed (a merge patch)
        }
        if count is not None:
            status["nodeCount"] = count
        obj.update(
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], {"status": status}, _request_timeout=30
            )
        )

    def _event(self, obj: dict[str, Any], reason: str, message: str, warning: bool = False) -> None:
        meta = obj["metadata"]
        now = _now()
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "reason": reason,
            "message": message[:1000],
            "type": "Warning" if warning else "Normal",
            "source": {"component": "nestlab-operator"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.kube.call(f"create an event of {_key(obj)}", self.kube.core.create_namespaced_event, meta["namespace"], body)


def _addresses(kube: Cluster, lab: str, pods: set[str], nodes: set[str]) -> dict[str, dict[str, list[str]]]:
    """Each lab node's addresses by interface (its management address on eth0), as its pod's nestlab inspects them.
    A pod's root decides what it prints: only nodes of the lab, interface names and addresses go in the status (the
    output bounded by the exec; anything else in it is dropped)."""
    found = {}
    answers = each(
        {p: p for p in pods}, lambda _s, pod: kube.exec(pod, ["nestlab", "inspect", "--lab", lab, "--format", "json"], 60)
    )
    for answer in answers.values():
        if not isinstance(answer, BaseException) and answer[0] == 0:
            with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                for node in json.loads(answer[1])["nodes"]:
                    if node["name"] in nodes:
                        found[node["name"]] = {
                            i["name"]: [str(ipaddress.ip_interface(a)) for a in i["addresses"]][:16]
                            for i in node["interfaces"][:64]
                            if i.get("addresses") and i["name"] != "lo" and _IFNAME.fullmatch(i["name"])
                        }
    return found


_IFNAME = re.compile(r"[-_.@a-zA-Z0-9]{1,15}")  # an interface's name, as Linux allows (no '/', no space)


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"], "uid": meta["uid"], "blockOwnerDeletion": False}


def _condition(kind: str, true: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if true else "False",
        "reason": reason,
        "message": message[:1000],
        "lastTransitionTime": _now(),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reason(status: dict[str, Any]) -> str | None:
    return next((c.get("reason") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
