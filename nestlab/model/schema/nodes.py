"""A node of the topology file: its kind, runtime, limits, components, stages, start-up and management keys, and
every key a kind of nestlab/kinds adds."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import ConfigDict, Field, create_model, field_validator

from ...names import IFNAMSIZ
from ...registry import KINDS, RUNTIMES
from ..bind import Bind
from ..units import parse_size
from .base import Strict, net_sysctls, parsed_by
from .management import Credentials

if TYPE_CHECKING:  # the registries' words, known once they load: words for the type checker
    NodeKind = str
    RuntimeName = str
else:
    # What a node is: a word of the kind registry (nestlab/kinds, docs/kinds.md), e.g. host for linux.
    NodeKind = Literal[tuple(w for w in KINDS.words() if not KINDS.get(w).machine)]
    # How a node runs: a word of the runtime registry (nestlab/runtimes, docs/nesting.md).
    RuntimeName = Literal[tuple(name for name in RUNTIMES.names() if RUNTIMES.get(name).selectable)]

# containerlab keys that load but have no effect yet: the CLI says so on every deploy.
IGNORED_NODE_KEYS = {
    "license": "only linux, frr, bridge and ovs kinds exist",
    "user": "commands run as the deploying user",
    "restart-policy": "nodes are not restarted",
    "type": "node types belong to vendor kinds nestlab does not run",
    "dns": "nodes use the machine's /etc/resolv.conf",
    "aliases": "nodes are named clab-LAB-NODE (and NODE in inventories), not by aliases",
    "certificate": "nestlab issues no TLS certificates",
    "cgroup-parent": "nestlab places each node in its lab's own cgroup",
    "image-pull-policy": "namespace nodes pull no images",
    "auto-remove": "nodes live until the lab is destroyed",
    "extras": "no vendor kind reads extras",
    "devices": "nodes see the machine's /dev",
    "cap-add": "commands run as root with every capability",
    "shm-size": "nodes share the machine's /dev/shm",
    "publish": "nodes are not published outside the machine",
    "sandbox": "no VM sandbox is used",
    "kernel": "no VM sandbox is used",
    "enforce-startup-config": "startup-config is always applied",
    "suppress-startup-config": "startup-config is always applied",
    "hostname": "a node's hostname is its name",
    "privileged": "commands run as root with every capability",
    "security-opts": "namespace nodes get no AppArmor, SELinux or seccomp profile",
    "pid-mode": "a node's processes are in the machine's PID namespace already",
    "cgroupns-mode": "nodes see the machine's cgroup tree, in their lab's own cgroup",
    "tmpfs": "no tmpfs is mounted; a node with a root of its own gets fresh /run and /tmp",
    "volumes": "nestlab has no Docker volumes; give binds: (src:dst)",
    "config": "containerlab's configuration engine drives vendor kinds nestlab does not run",
    "link-apply-mode": "`containerlab apply` is not answered; a second deploy reconciles the lab",
}

COMPONENT_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
CPUSET_PATTERN = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"


class Resources(Strict):
    """cgroup limits of a node or component (v1 or v2, whichever the machine has)."""

    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU time as a number of cores (CFS quota), e.g. 0.5")
    cpu_shares: int | None = Field(
        default=None, ge=2, le=262144, description="relative weight under contention (v1 shares; v2 weight)"
    )
    memory: str | int | None = Field(default=None, description="hard limit, e.g. 256m; exceeding it OOM-kills inside the cgroup")
    pids: int | None = Field(default=None, ge=1, description="most processes and threads at once")
    cpuset: str | None = Field(default=None, pattern=CPUSET_PATTERN, description='CPUs allowed, e.g. "0" or "0-1"')

    _memory = parsed_by(parse_size, "memory")


class ComponentSpec(Strict):
    """A container inside a node: own network, UTS, PID and mount namespaces and cgroup."""

    resources: Resources | None = None
    image: str | None = Field(
        default=None, description="own root filesystem: rootfs dir, tarball, OCI layout or built image name"
    )
    exec: list[str] = Field(default_factory=list, description="shell commands run in the component after deploy")
    env: dict[str, str | int] = Field(default_factory=dict)
    sysctls: dict[str, str | int] = Field(default_factory=dict)

    _net_only = parsed_by(net_sysctls, "sysctls")


StageName = Literal["create", "create-links", "configure", "healthy", "exit"]
STAGES: tuple[str, ...] = get_args(StageName)


class WaitFor(Strict):
    node: str
    stage: StageName = "create"


class StageExec(Strict):
    command: str
    phase: Literal["on-enter", "on-exit"] = "on-enter"
    target: Literal["container", "host"] = Field(default="container", description="host: run on this machine, not in the node")


class StageSpec(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    wait_for: list[WaitFor] = Field(default_factory=list, alias="wait-for")
    exec: list[StageExec] = Field(default_factory=list)


class Healthcheck(Strict):
    """Docker's healthcheck: ``test: [CMD-SHELL, "cmd"]`` or ``[CMD, arg, ...]``; times in seconds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    test: list[str] = Field(min_length=1)
    interval: float = Field(default=1, gt=0)
    timeout: float = Field(default=5, gt=0)
    retries: int = Field(default=3, ge=1)
    start_period: float = Field(default=0, ge=0, alias="start-period")

    @field_validator("test")
    @classmethod
    def _form(cls, value: Any) -> Any:
        if value[0] not in ("CMD", "CMD-SHELL", "NONE") or (value[0] != "NONE" and len(value) < 2):
            raise ValueError('test must be ["CMD-SHELL", "command"], ["CMD", "program", "arg", ...] or ["NONE"]')
        return value


class _NodeBase(Strict):
    """One node. ``kind`` falls back to ``topology.kinds`` / ``topology.defaults``, then ``linux``.
    The keys of each kind come from its module in nestlab/kinds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    kind: NodeKind | None = None
    exec: list[str] = Field(default_factory=list, description="shell commands run in the node after deploy")
    sysctls: dict[str, str | int] = Field(default_factory=dict, description="net.* sysctls of the node")
    env: dict[str, str | int] = Field(default_factory=dict, description="environment of exec/cmd/shell")
    host: str | None = Field(default=None, description="the emulated machine (under hosts:) the node runs on")
    mode: Literal["netns", "none", "host"] | None = Field(
        default=None,
        description="none (or host, read as none): share the host's network stack (LXC none); netns: own stack (default)",
    )
    # Containers: limits, own filesystem, nested components (docs/nesting.md)
    resources: Resources | None = None
    image: str | None = Field(
        default=None,
        description="own root filesystem (runc): rootfs dir, tarball, OCI layout, built image name; with runtime: docker, a Docker image",
    )
    runtime: RuntimeName | None = Field(
        default=None, description="namespace (default without image), runc (default with image), docker..."
    )
    components: dict[str, ComponentSpec] = Field(
        default_factory=dict, description="child containers joined by the node's internal switch"
    )
    internal_switch: Literal["bridge", "ovs"] = Field(default="bridge", description="what joins the components inside the node")
    internal_subnet: str = Field(default="10.99.0.0/24", description="components' eth0 addresses, the same inside every node")
    nesting: Literal["nested", "flat"] = Field(
        default="nested", description="flat: components are processes sharing the node's stack"
    )
    mptcp: MptcpSpec | None = Field(default=None, description="Multipath TCP limits and endpoints (docs/multipath.md)")
    group: str | None = Field(
        default=None, description="a name under topology.groups: the node takes that group's keys it does not set itself"
    )
    server: str | None = Field(
        default=None, description="the server (under servers:) the node runs on; default: placed by nestlab"
    )
    # A filesystem view of its own (docs/routers.md)
    binds: list[Bind] = Field(
        default_factory=list,
        description="src:dst[:ro]: a file or folder of the machine at dst in the node's own view (src relative to the topology file)",
    )
    own_root: bool = Field(
        default=False, description="the node sees the machine's files under a writable layer of its own (set for server images)"
    )
    startup_config: str | None = Field(
        default=None,
        alias="startup-config",
        description="frr: the router's frr.conf, a file (relative to the topology file) or the text itself",
    )
    # containerlab's start-up keys (docs/compat.md)
    cmd: str | list[str] | None = Field(
        default=None, description="the node's main process, started after its links are up and kept running"
    )
    entrypoint: str | None = Field(default=None, description="put before cmd (containerlab/Docker entrypoint)")
    startup_delay: float | None = Field(
        default=None, alias="startup-delay", ge=0, le=3600, description="seconds to wait before the node's stages, cmd and exec"
    )
    stages: dict[StageName, StageSpec] = Field(
        default_factory=dict, description="containerlab stages: wait-for other nodes' stages, exec on entering/leaving"
    )
    healthcheck: Healthcheck | None = Field(
        default=None, description="the test that makes the node healthy (Docker's healthcheck)"
    )
    ports: list[str | int] = Field(
        default_factory=list,
        description="[127.0.0.1:]HOST:NODE[/tcp|/udp]: this machine's loopback port forwarded to the node (with allow_host_ports: true)",
    )
    labels: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="free-form labels, shown by inspect --format json"
    )
    # The management network (docs/management.md)
    mgmt_ipv4: str | None = Field(default=None, alias="mgmt-ipv4", description="the node's fixed management address")
    mgmt_ipv6: str | None = Field(default=None, alias="mgmt-ipv6", description="the node's fixed IPv6 management address")
    network_mode: str | None = Field(
        default=None,
        alias="network-mode",
        description="none: no management interface; host: this machine's network stack; container:NODE: NODE's stack",
    )
    ssh: bool | None = Field(default=None, description="false: no SSH on the node's management address")
    credentials: Credentials | None = Field(default=None, description="username/password (and identity-file) for SSH")
    component_of: str | None = Field(default=None, description="(set by nestlab) the node a component belongs to")

    _net_only = parsed_by(net_sysctls, "sysctls")

    @field_validator("mode")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        """``host`` (Docker's word) is ``none`` (LXC's): the node uses its host's network stack."""
        return "none" if value == "host" else value

    @field_validator("internal_subnet")
    @classmethod
    def _subnet(cls, value: Any) -> Any:
        try:
            net = ipaddress.IPv4Network(value)
        except ValueError as exc:
            raise ValueError(f"'{value}' is not an IPv4 network such as 10.99.0.0/24 ({exc})") from None
        if net.prefixlen > 29:
            raise ValueError(f"'{value}' is too small for components; use /29 or larger")
        return value

    @field_validator("components")
    @classmethod
    def _component_names(cls, value: Any) -> Any:
        for name in value:
            if not re.match(COMPONENT_PATTERN, name) or len(name) > IFNAMSIZ or name == "self":
                raise ValueError(
                    f"component name '{name}' must be 1-{IFNAMSIZ} lowercase letters, digits, '-', '_' (and not 'self')"
                )
        return value


class MptcpSpec(Strict):
    """Multipath TCP in a node: limits and an endpoint on every addressed interface (docs/multipath.md)."""

    enabled: bool = True
    subflows: int = Field(default=8, ge=0, le=8, description="extra subflows per connection (the kernel allows 8)")
    add_addr_accepted: int = Field(default=8, ge=0, le=8, description="addresses announced by the peer that are used")
    endpoints: Literal["subflow", "signal", "fullmesh"] = Field(
        default="subflow", description="how this node's addresses are used"
    )
    scheduler: str = Field(default="default", description="net.mptcp.scheduler, where the kernel has it")


def _kind_options() -> dict[str, Any]:
    """Every key a node kind owns, and every key it reads on nodes of any kind, with its schema."""
    owned = [item for kind in KINDS.values() for item in (*kind.options.items(), *kind.node_options.items())]
    return {key: (annotation, Field(**field)) for key, (annotation, field) in owned}


if TYPE_CHECKING:  # for the type checker: the common keys, and a kind's own keys as Any

    class NodeSpec(_NodeBase):
        def __getattr__(self, name: str) -> Any: ...
else:
    NodeSpec = create_model("NodeSpec", __base__=_NodeBase, __doc__=_NodeBase.__doc__, **_kind_options())
