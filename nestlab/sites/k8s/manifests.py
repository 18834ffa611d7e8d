"""The objects of a lab on Kubernetes, as data (the package's text says what each does): a Secret
``LAB-shares`` with every share's topology and the files it binds (mounted read-only for root alone), a headless
Service ``LAB`` and a Pod ``LAB-SHARE`` per share, in a user namespace of its own unless privileged (isolation.py).
``nestlab k8s render`` writes them; the site creates them."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...errors import LabError
from ...model import files
from ...model.bind import Bind
from ..shares import place_and_partition
from .isolation import guarded, pod_fields

if TYPE_CHECKING:
    from ...plan.blueprint import Blueprint
    from ...plan.partition import Partition


LABEL = "nestlab.dev/lab"
SHARE = "nestlab.dev/share"
NESTLAB_REF = f"localhost/nestlab:{__version__}"  # the image `nestlab k8s image` and `k8s cluster up` build
RUN = "/run/nestlab-k8s"  # inside a pod: peers.env, deploy.log, rc


def dns_label(lab_name: str) -> str:
    """The lab's name as Kubernetes objects take it: lower case, '-' for any other character, at most 50."""
    name = re.sub(r"[^a-z0-9-]", "-", lab_name.lower())[:50].strip("-")
    if not name:
        raise LabError(f"lab name '{lab_name}' has no letter or digit to name Kubernetes objects after")
    return name


def share_names(blueprint: Blueprint, count: int) -> list[str]:
    """The shares: every Kubernetes node a node is pinned to (``server: node2``), then s1, s2, ... up to ``count``."""
    pinned = sorted({spec.server for spec in blueprint.topology.topology.nodes.values() if spec.server})
    for share in pinned:
        if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", share):
            raise LabError(f"server: {share} cannot name a Kubernetes node (lower-case letters, digits and '-')")
    generic = (f"s{i}" for i in range(1, 10_000) if f"s{i}" not in pinned)
    return pinned + [next(generic) for _ in range(max(0, count - len(pinned)))]


def peer_var(share: str) -> str:
    """The variable a pod's start script holds the address of ``share``'s pod in."""
    return "NESTLAB_PEER_" + share.upper().replace("-", "_")


def render(
    blueprint: Blueprint,
    count: int,
    image: str,
    namespace: str = "default",
    nodes: set[str] | None = None,
    privileged: bool = False,
) -> tuple[list[dict[str, Any]], Partition]:
    """The manifests (Secret, headless Service, one Pod per share) and the partition they carry; ``nodes``:
    the cluster's node names, which a share named after one is pinned to (default: the pinned shares); ``privileged``:
    pods as root of their nodes, not in user namespaces of their own."""
    import yaml

    from ...model.schema.machines import ServerSpec

    if count < 1:
        raise LabError("--servers must be at least 1")
    name = dns_label(blueprint.name)
    shares = share_names(blueprint, count)
    pinned = {s for s in shares if (s in nodes if nodes is not None else not re.match(r"^s\d+$", s))}
    parts = place_and_partition(
        blueprint, {s: ServerSpec(address=s) for s in shares}, {s: "${" + peer_var(s) + "}" for s in shares}
    )
    labels = {"app.kubernetes.io/name": "nestlab", LABEL: name}
    shipped: dict[str, str] = {}  # Secret key -> the file's text, for every file a share binds or reads
    layout: dict[str, str] = {}  # Secret key -> its path under /etc/nestlab
    for share in shares:
        _ship_binds(parts.shares[share].topology, shipped, layout)
        _ship_given(parts.shares[share].topology, shipped, layout)
    data = {f"{s}.yml": yaml.safe_dump(parts.shares[s].topology, sort_keys=False) for s in shares} | shipped
    if sum(len(v) for v in data.values()) > _SECRET_BYTES:
        raise LabError(
            f"the shares and the files they bind come to more than {_SECRET_BYTES // 1024} KiB, "
            "which a Secret cannot hold: bind fewer or smaller files"
        )
    config = {  # a Secret: the topology holds passwords, startup-configs, env values
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": f"{name}-shares", "namespace": namespace, "labels": labels},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": {LABEL: name},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "vxlan", "port": blueprint.topology.stitch.port, "protocol": "UDP"}],
        },
    }
    items = [{"key": f"{s}.yml", "path": f"{s}.yml"} for s in shares] + [{"key": k, "path": v} for k, v in sorted(layout.items())]
    pods = [_pod(blueprint.name, name, s, shares, image, namespace, labels, s in pinned, items, privileged) for s in shares]
    return [config, service, *pods], parts


_SECRET_BYTES = 740 * 1024  # the API refuses a Secret over 1 MiB: base64 makes 4 bytes of 3


def _ship_binds(topology: dict[str, Any], shipped: dict[str, str], layout: dict[str, str]) -> None:
    """Point every bind of a share at a copy under /etc/nestlab/files/ in the pod, each file of it put in
    ``shipped`` (by Secret key) and ``layout`` (key -> its path in the volume): the pods do not share
    this machine's disk."""

    for spec in topology["topology"]["nodes"].values():
        binds = []
        for text in spec.get("binds") or []:
            bind = Bind(text)
            src = bind.source
            digest = hashlib.sha256(src.encode()).hexdigest()[:12]
            folder = f"files/{digest}"
            paths = files.walk(src)
            for path in paths:
                rel = os.path.basename(src) if path == src else os.path.join(os.path.basename(src), os.path.relpath(path, src))
                key = f"{digest}-{re.sub(r'[^-._a-zA-Z0-9]', '_', rel)}"
                try:
                    shipped[key] = files.read_text(path, _SECRET_BYTES)
                except (OSError, UnicodeDecodeError) as exc:
                    why = getattr(exc, "strerror", None) or "not UTF-8 text"
                    raise LabError(f"bind {text}: {path} cannot be sent to a pod as text ({why})") from None
                layout[key] = f"{folder}/{rel}"
            binds.append(str(Bind.of(f"/etc/nestlab/{folder}/{os.path.basename(src)}", bind.target, bind.mode)))
        if binds:
            spec["binds"] = binds


def _ship_given(topology: dict[str, Any], shipped: dict[str, str], layout: dict[str, str]) -> None:
    """Every file a NestLab gave (model.files.only's: a trace, a graph) that a share's topology names, in the Secret
    at the path it names (under /etc/nestlab/files/, the pod's)."""
    given = files.given() or {}

    def visit(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)
        elif isinstance(value, str) and value in given and value.startswith("/etc/nestlab/"):
            key = "given-" + re.sub(r"[^-._a-zA-Z0-9]", "_", value.removeprefix("/etc/nestlab/files/"))
            shipped[key] = given[value].decode()
            layout[key] = value.removeprefix("/etc/nestlab/")

    visit(topology)


def _pod(
    lab: str,
    name: str,
    share: str,
    shares: list[str],
    image: str,
    namespace: str,
    labels: dict[str, str],
    pinned: bool,
    items: list[dict[str, str]],
    privileged: bool,
) -> dict[str, Any]:
    """The pod of ``share``: its start script, in a user namespace of its own unless ``privileged``, on the node it is
    pinned to or spread from the lab's other pods."""
    pod_security, container_security = pod_fields(privileged)
    spec: dict[str, Any] = {
        "hostname": share,
        "subdomain": name,
        "terminationGracePeriodSeconds": 30,
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        **pod_security,
        "containers": [
            {
                "name": "nestlab",
                "image": image,
                "command": ["sh", "-c", _script(name, share, shares, privileged)],
                "imagePullPolicy": "Never" if image.startswith("localhost/") else "IfNotPresent",
                "securityContext": container_security,
                "volumeMounts": [{"name": "share", "mountPath": "/etc/nestlab", "readOnly": True}],
                "readinessProbe": {"exec": {"command": ["sh", "-c", f"exit $(cat {RUN}/rc)"]}, "periodSeconds": 2},
                "lifecycle": {
                    "preStop": {"exec": {"command": ["sh", "-c", f"[ ! -e {RUN}/rc ] || nestlab destroy --lab {lab}"]}}
                },
            }
        ],
        "volumes": [{"name": "share", "secret": {"secretName": f"{name}-shares", "items": items, "defaultMode": 0o400}}],
        **_placed(name, share, pinned),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-{share}", "namespace": namespace, "labels": {**labels, SHARE: share}},
        "spec": spec,
    }


def _script(name: str, share: str, shares: list[str], privileged: bool) -> str:
    """A pod's start script: wait for its peers' addresses, deploy its share, record how that went, then wait."""
    deploy = f"CLAB_LABDIR_BASE={RUN} nestlab deploy -t /etc/nestlab/{share}.yml"
    deploy = deploy if privileged else guarded(deploy)
    resolve = " && ".join(f'{peer_var(s)}=$(getent hosts {s}.{name} | cut -d" " -f1) && [ -n "${peer_var(s)}" ]' for s in shares)
    return (
        f"mkdir -p {RUN}; trap 'exit 0' TERM\n"
        f"until [ -s {RUN}/peers.env ]; do  # written by nestlab k8s deploy, or found in the cluster's DNS\n"
        f"  if {resolve}; then {{ {'; '.join(f'echo {peer_var(s)}=${peer_var(s)}' for s in shares)}; }} > {RUN}/peers.env; fi\n"
        f"  sleep 0.2\ndone\n"
        f"set -a; . {RUN}/peers.env; set +a\n"
        # the share's lab directory in the pod's own /run (its file's folder is a read-only Secret, root's alone)
        f"{deploy} > {RUN}/deploy.log 2>&1; echo $? > {RUN}/rc.tmp; mv {RUN}/rc.tmp {RUN}/rc\n"
        f"cat {RUN}/deploy.log\nsleep infinity & wait\n"
    )


def _placed(name: str, share: str, pinned: bool) -> dict[str, Any]:
    """The pod's place: on the node its share is named after when pinned, else spread over the nodes when it can."""
    if pinned:
        return {"nodeSelector": {"kubernetes.io/hostname": share}}
    term = {"labelSelector": {"matchLabels": {LABEL: name}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "affinity": {
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}
        }
    }
