"""How a lab's pods are kept from their cluster nodes (docs/security.md): each runs in a user namespace of its
own (``hostUsers: false``), not privileged, with the capabilities below and the runtime's default seccomp profile;
its root is an unmapped id on the node, so what its capabilities reach is the pod's own namespaces, and nestlab's
nodes are namespaces made inside it.  ``--privileged`` (``nestlab k8s deploy``) asks for the old pods instead.

Known, not assumed: a cluster whose nodes do not report user namespaces is refused before any pod is made
(:func:`refusal`), a pod's start script makes no node if its uid map is the node's own (:func:`guarded`), and every
new pod's map is read from outside before its share deploys (:func:`check_pods`)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from ...backends.remote.kube import ClusterError
from ...backends.remote.pod import each

if TYPE_CHECKING:
    from ...backends.remote.kube import Cluster

# Each capability a lab pod keeps (all others dropped), and why; in a user namespace each acts only on namespaces
# the pod owns: its own and those nestlab makes inside it.
CAPABILITIES = {
    "SYS_ADMIN": "nodes: unshare/setns of network, mount, UTS, IPC and PID namespaces; their mounts (tmpfs, binds, "
    "a node's sysfs); also what lets the runtime's default seccomp profile allow those system calls",
    "NET_ADMIN": "links, veth, bridges, VXLAN, addresses, routes, tc (HTB shaping), nftables, a node's net sysctls",
    "NET_RAW": "ping, capture (packet sockets), FRR's raw sockets (OSPF)",
    "NET_BIND_SERVICE": "sshd on port 22 of the management network, FRR's BGP on 179",
    "SETUID": "FRR and sshd switch to users of their own",
    "SETGID": "the same, their groups",
    "SETPCAP": "runc, for a node with an image:, drops capabilities from its container's bounding set",
    "CHOWN": "files handed to FRR's and sshd's users",
    "DAC_OVERRIDE": "root reads and writes files its daemons own",
    "FOWNER": "the same, their modes and times",
    "KILL": "node stop and destroy signal every process of a node, whatever its user",
    "SYS_CHROOT": "sshd's privilege separation",
}
RUNTIMES = "containerd 2.0 or later with runc 1.2 or later (or crun 1.9), or CRI-O 1.25 or later"
BLOCK = 65536  # the kubelet hands each pod ids in blocks of this many, at a host id that is a multiple of it
REFUSED = 86  # the exit code a pod's start script records when it runs as its node's root


def isolated(uid_map: str) -> bool:
    """Whether a pod's ``/proc/self/uid_map`` is one the kubelet hands out: one line mapping its root to a non-zero
    host id, both the id and the count multiples of :data:`BLOCK`.  The node's own map (``0 0 4294967295``), or a
    cluster node's that itself runs in a user namespace (``0 100000 65536``), is not."""
    lines = uid_map.strip().splitlines()
    if len(lines) != 1 or not re.fullmatch(r"0\s+\d+\s+\d+", lines[0].strip()):
        return False
    _inside, host, count = (int(field) for field in lines[0].split())
    return host > 0 and host % BLOCK == 0 and count > 0 and count % BLOCK == 0


def guarded(command: str, uid_map: str = "/proc/self/uid_map") -> str:
    """``command`` (a share's deploy) as a pod's start script runs it: not at all unless the pod's uid map is
    :func:`isolated` (else it says why and ends with :data:`REFUSED`)."""
    why = (
        "nestlab: this pod asked for hostUsers: false but its uid map is not a user namespace of its own (its "
        "container runtime ignored the field): no node made"
    )
    isolated_sh = (
        f'set -- $(cat {shlex.quote(uid_map)}) && [ $# -eq 3 ] && [ "$1" = 0 ] && [ "$2" -gt 0 ] && '
        f'[ $(($2 % {BLOCK})) -eq 0 ] && [ "$3" -gt 0 ] && [ $(($3 % {BLOCK})) -eq 0 ]'
    )
    return f"if ( {isolated_sh} ) 2>/dev/null; then {command}; else echo {shlex.quote(why)}; (exit {REFUSED}); fi"


def pod_fields(privileged: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod spec's and its container's security fields."""
    if privileged:
        return {}, {"privileged": True}
    return {"hostUsers": False}, {
        "privileged": False,
        "capabilities": {"drop": ["ALL"], "add": sorted(CAPABILITIES)},
        # /proc without the runtime's masks and read-only paths: a node's sysctls are written there; the user
        # namespace, not the masks, keeps the node's own settings (/proc/sysrq-trigger, /proc/sys/kernel) out of reach
        "procMount": "Unmasked",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def refusal(nodes: dict[str, dict[str, Any]], where: set[str] | None = None) -> str | None:
    """Why the cluster cannot run the lab's pods in user namespaces (``nodes``: Cluster.nodes(); ``where``: the nodes
    its pods may go to, default every Ready one), or None."""
    names = sorted(where if where is not None else (n for n, v in nodes.items() if v.get("ready")))
    unable = [n for n in names if n in nodes and not nodes[n].get("userns")]
    if not unable:
        return None
    runtimes = sorted({nodes[n].get("runtime") or "an unknown runtime" for n in unable})
    return (
        f"node{'s' if len(unable) > 1 else ''} {', '.join(unable[:5])} (running {', '.join(runtimes)}) cannot run a pod "
        f"in a user namespace of its own, which lab pods are by default (hostUsers: false): that takes Kubernetes 1.33 "
        f"or later and {RUNTIMES}. Upgrade the runtime, or run the lab's pods privileged (nestlab k8s deploy --privileged): "
        "root in its nodes is then root on the cluster node"
    )


def require(nodes: dict[str, dict[str, Any]], where: set[str] | None = None) -> None:
    """:func:`refusal` as an error: what the operator and ``nestlab k8s deploy`` call before making a lab's pods."""
    if why := refusal(nodes, where):
        raise ClusterError(why)


def check_pods(kube: Cluster, pods: dict[str, str], selector: str) -> None:
    """Read each running pod's uid map: a pod whose map is not :func:`isolated` was run by a runtime that ignored
    hostUsers: false; the error names it (its name and version, as the node reports them)."""
    answers = each(pods, lambda _share, pod: kube.exec(pod, ["cat", "/proc/self/uid_map"], 30))
    found = {p.metadata.name: p.spec.node_name for p in kube.pods(selector)}
    nodes = kube.nodes()
    for share, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            raise ClusterError(f"share {share}: its uid map could not be read: {answer}")
        if answer[0] != 0:
            raise ClusterError(f"share {share}: its uid map could not be read (exit {answer[0]})")  # its output: the pod's
        if isolated(answer[1]):
            continue
        node = found.get(pods[share], "?")
        runtime = nodes.get(node, {}).get("runtime") or "an unknown runtime"
        raise ClusterError(
            f"pod {pods[share]} runs as the root of node {node} although it asked for hostUsers: false: {runtime} ran it "
            f"without a user namespace of its own (it needs {RUNTIMES})"
        )
