"""The topology file's schema (pydantic), containerlab-shaped.

Example::

    name: quickstart
    topology:
      defaults: {kind: linux}
      nodes:
        h1: {}
        h2: {}
        s1: {kind: bridge}
      links:
        - endpoints: ["h1:eth1", "s1:p1"]
          ipv4: ["10.0.0.1/24", null]
        - endpoints: ["h2:eth1", "s1:p2"]
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model, field_validator, model_validator

from ..names import IFNAMSIZ
from ..registry import KINDS, LINK_MODES, RUNTIMES
from . import credentials, shape_keys
from .bind import Bind
from .checks import Check
from .endpoint import Endpoint
from .units import parse_rate, parse_size, parse_time

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
DEFAULT_IPV4_POOL = "10.200.0.0/16"

# What a node is: a word of the kind registry (nestlab/kinds, docs/kinds.md), e.g. host for linux.
NodeKind = Literal[tuple(w for w in KINDS.words() if not KINDS.get(w).machine)]
# How a link endpoint is attached: a word of the link-mode registry (nestlab/links, docs/modes.md).
LinkMode = Literal[tuple(LINK_MODES.words())]
# How a node runs: a word of the runtime registry (nestlab/runtimes, docs/nesting.md).
RuntimeName = Literal[tuple(name for name in RUNTIMES.names() if RUNTIMES.get(name).selectable)]
# The host every node is on when a topology declares no ``hosts:``.
IMPLICIT_HOST = "local"

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
IGNORED_TOP_KEYS = {
    "settings": "nestlab has no certificate authority or per-lab settings",
    "debug": "nestlab says what it does anyway",
}
IGNORED_LINK_KEYS = {"vars": "link vars feed templates, which nestlab does not render", "labels": "link labels are not used"}


def _net_sysctls(value: dict) -> dict:
    for key in value:
        if not key.startswith("net."):
            raise ValueError(f"'{key}' is not per-namespace; a node or host may set only net.* sysctls")
    return value


def _parsed_by(parser, *fields: str):
    """A field validator that lets ``parser`` reject a value (its ValueError becomes the message)."""

    def check(cls, value):
        if value is not None:
            parser(value)
        return value

    return field_validator(*fields)(classmethod(check))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


COMPONENT_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
CPUSET_PATTERN = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"


class Resources(_Strict):
    """cgroup limits of a node or component (v1 or v2, whichever the machine has)."""

    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU time as a number of cores (CFS quota), e.g. 0.5")
    cpu_shares: int | None = Field(
        default=None, ge=2, le=262144, description="relative weight under contention (v1 shares; v2 weight)"
    )
    memory: str | int | None = Field(default=None, description="hard limit, e.g. 256m; exceeding it OOM-kills inside the cgroup")
    pids: int | None = Field(default=None, ge=1, description="most processes and threads at once")
    cpuset: str | None = Field(default=None, pattern=CPUSET_PATTERN, description='CPUs allowed, e.g. "0" or "0-1"')

    _memory = _parsed_by(parse_size, "memory")


class ComponentSpec(_Strict):
    """A container inside a node: own network, UTS, PID and mount namespaces and cgroup."""

    resources: Resources | None = None
    image: str | None = Field(
        default=None, description="own root filesystem: rootfs dir, tarball, OCI layout or built image name"
    )
    exec: list[str] = Field(default_factory=list, description="shell commands run in the component after deploy")
    env: dict[str, str | int] = Field(default_factory=dict)
    sysctls: dict[str, str | int] = Field(default_factory=dict)

    _net_only = _parsed_by(_net_sysctls, "sysctls")


StageName = Literal["create", "create-links", "configure", "healthy", "exit"]
STAGES: tuple[str, ...] = StageName.__args__


class WaitFor(_Strict):
    node: str
    stage: StageName = "create"


class StageExec(_Strict):
    command: str
    phase: Literal["on-enter", "on-exit"] = "on-enter"
    target: Literal["container", "host"] = Field(default="container", description="host: run on this machine, not in the node")


class StageSpec(_Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    wait_for: list[WaitFor] = Field(default_factory=list, alias="wait-for")
    exec: list[StageExec] = Field(default_factory=list)


class Healthcheck(_Strict):
    """Docker's healthcheck: ``test: [CMD-SHELL, "cmd"]`` or ``[CMD, arg, ...]``; times in seconds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    test: list[str] = Field(min_length=1)
    interval: float = Field(default=1, gt=0)
    timeout: float = Field(default=5, gt=0)
    retries: int = Field(default=3, ge=1)
    start_period: float = Field(default=0, ge=0, alias="start-period")

    @field_validator("test")
    @classmethod
    def _form(cls, value):
        if value[0] not in ("CMD", "CMD-SHELL", "NONE") or (value[0] != "NONE" and len(value) < 2):
            raise ValueError('test must be ["CMD-SHELL", "command"], ["CMD", "program", "arg", ...] or ["NONE"]')
        return value


class Credentials(_Strict):
    """containerlab's ``credentials:`` (docs/management.md): who logs in over SSH; each key falls back
    separately, node > group > kind > defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    username: str | None = Field(default=None, description="a POSIX user name (not root with a password)")
    password: str | None = Field(default=None, min_length=1)
    identity_file: str | None = Field(default=None, alias="identity-file", description="private key for the ssh config")

    @field_validator("username")
    @classmethod
    def _username(cls, value: str | None) -> str | None:
        if value is not None and (problem := credentials.username_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("password", "identity_file")
    @classmethod
    def _one_line(cls, value: str | None, info) -> str | None:
        forbidden = "\n\r\0" + ('"\\' if info.field_name == "identity_file" else "")  # breaks ssh_config's quoted IdentityFile
        if value is not None and (problem := credentials.text_problem(value, info.field_name.replace("_", "-"), forbidden)):
            raise ValueError(problem)
        if info.field_name == "password" and value is not None and len(value.encode()) > 256:
            raise ValueError("password is longer than 256 bytes (openssl passwd -6 would cut it short)")
        return value

    @model_validator(mode="after")
    def _never_root(self):
        if self.username == "root" and self.password:
            raise ValueError("a password login is never root: name another user (root logs in with the lab's key)")
        return self


class _NodeBase(_Strict):
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

    _net_only = _parsed_by(_net_sysctls, "sysctls")

    @field_validator("mode")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        """``host`` (Docker's word) is ``none`` (LXC's): the node uses its host's network stack."""
        return "none" if value == "host" else value

    @field_validator("internal_subnet")
    @classmethod
    def _subnet(cls, value):
        try:
            net = ipaddress.IPv4Network(value)
        except ValueError as exc:
            raise ValueError(f"'{value}' is not an IPv4 network such as 10.99.0.0/24 ({exc})") from None
        if net.prefixlen > 29:
            raise ValueError(f"'{value}' is too small for components; use /29 or larger")
        return value

    @field_validator("components")
    @classmethod
    def _component_names(cls, value):
        for name in value:
            if not re.match(COMPONENT_PATTERN, name) or len(name) > IFNAMSIZ or name == "self":
                raise ValueError(
                    f"component name '{name}' must be 1-{IFNAMSIZ} lowercase letters, digits, '-', '_' (and not 'self')"
                )
        return value


class Shape(_Strict):
    """What one direction of a link does to packets (the sending endpoint's egress)."""

    rate: str | None = Field(default=None, description="1kbit..400gbit, HTB with 64-bit rates")
    qdisc: Literal[*shape_keys.QDISCS] | None = Field(
        default=None, description="what enforces the rate: htb (default) or tbf (up to 34gbit)"
    )
    burst: str | int | None = Field(default=None, description="HTB burst, e.g. 64kb (default: rate/HZ + MTU)")
    queue: int | None = Field(default=None, ge=1, description="queue length in packets")
    delay: str | None = Field(default=None, description="e.g. 20ms (netem)")
    jitter: str | None = Field(default=None, description="e.g. 5ms, needs delay (netem)")
    distribution: Literal[*shape_keys.DISTRIBUTIONS] | None = Field(
        default=None, description="of the jitter (netem; default uniform)"
    )
    loss: str | float | None = Field(default=None, description="e.g. 10% (netem)")
    loss_correlation: str | float | None = None
    corrupt: str | float | None = None
    duplicate: str | float | None = None
    reorder: str | float | None = Field(default=None, description="share of packets sent early, needs delay (netem)")
    gemodel: str | None = Field(
        default=None, description="Gilbert-Elliott bursty loss, 'P R [1-H [1-K]]' as tc writes it, e.g. '5% 20%' (netem)"
    )
    trace: str | None = Field(
        default=None, description="a Mahimahi delivery trace (one line per 1500-byte opportunity, in ms), replayed in a loop"
    )

    _rate = _parsed_by(shape_keys.PARSERS["rate"], "rate")
    _burst = _parsed_by(shape_keys.PARSERS["burst"], "burst")
    _times = _parsed_by(shape_keys.PARSERS["delay"], "delay", "jitter")
    _shares = _parsed_by(shape_keys.PARSERS["loss"], "loss", "loss_correlation", "corrupt", "duplicate", "reorder")
    _gemodel = _parsed_by(shape_keys.PARSERS["gemodel"], "gemodel")


class LinkParams(Shape):
    """Shaping for both directions; ``a:``/``b:`` override it for what that endpoint sends."""

    @model_validator(mode="after")
    def _tbf_rate(self):
        for shape in (self, self.a, self.b):
            if shape is not None and (wrong := shape_keys.tbf_problem(shape.qdisc or self.qdisc, shape.rate)):
                raise ValueError(f"qdisc: {wrong}")
        return self

    state: Literal[*shape_keys.STATES] | None = None
    a: Shape | None = None
    b: Shape | None = None


class MptcpSpec(_Strict):
    """Multipath TCP in a node: limits and an endpoint on every addressed interface (docs/multipath.md)."""

    enabled: bool = True
    subflows: int = Field(default=8, ge=0, le=8, description="extra subflows per connection (the kernel allows 8)")
    add_addr_accepted: int = Field(default=8, ge=0, le=8, description="addresses announced by the peer that are used")
    endpoints: Literal["subflow", "signal", "fullmesh"] = Field(
        default="subflow", description="how this node's addresses are used"
    )
    scheduler: str = Field(default="default", description="net.mptcp.scheduler, where the kernel has it")


class _LinkBase(_Strict):
    """How endpoints ``NODE:IFACE`` are connected; ``ipv4``/``ipv6`` list one entry per endpoint.

    Two endpoints: a veth (or an overlay such as ``mode: vxlan``, an OVS port when one end is
    a ``kind: ovs`` node).  One endpoint: an attachment to its host (``mode: bridge|macvlan|...``),
    usually on a host NIC ``parent``.  The keys of each mode come from its module in nestlab/links.
    """

    endpoints: list[Endpoint] = Field(min_length=1, max_length=2)
    parent: str | None = Field(default=None, description="HOST:NIC the attachment sits on, e.g. server:nic0")
    ipv4: list[str | None] | None = None
    ipv6: list[str | None] | None = None
    mtu: int | None = Field(default=None, ge=68, le=65535)
    params: LinkParams | None = Field(default=None, description="rate, delay, loss... (see docs/shaping.md)")
    paths: int | None = Field(
        default=None, ge=1, le=64, description="endpoints are two nodes: N parallel links NODE:p1..pN, each its own subnet"
    )
    macs: list[str | None] | None = Field(
        default=None, description="veth: each endpoint's MAC address (containerlab's endpoint mac:), null for the kernel's choice"
    )

    @field_validator("macs")
    @classmethod
    def _macs(cls, value):
        for mac in value or []:
            if mac is not None and (not re.match(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$", mac) or int(mac[:2], 16) & 1):
                raise ValueError(f"'{mac}' is not a unicast MAC address such as 02:00:00:00:00:01")
        return value

    @field_validator("mode", check_fields=False)
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        """A mode's older word (``host`` for ``machine-veth``) is the mode."""
        return LINK_MODES.canonical(value) if value else value

    @field_validator("endpoints", mode="before")
    @classmethod
    def _extended_form(cls, value):
        """Accept containerlab's extended endpoint form ``{node: h1, interface: eth1}``."""
        if isinstance(value, list):
            return [
                f"{ep.get('node')}:{ep.get('interface')}"
                if isinstance(ep, dict) and set(ep) <= {"node", "interface", "mac"}
                else ep
                for ep in value
            ]
        return value


def _mode_options() -> dict:
    """Every key a link mode owns, with its schema (a key several modes share is declared alike by each)."""
    return {key: spec for mode in LINK_MODES.values() for key, spec in mode.options.items()}


if TYPE_CHECKING:  # for the type checker: the common keys, and a mode's own keys as Any

    class LinkSpec(_LinkBase):
        mode: str | None

        def __getattr__(self, name: str) -> Any: ...
else:
    LinkSpec = create_model(
        "LinkSpec", __base__=_LinkBase, __doc__=_LinkBase.__doc__, mode=(LinkMode | None, None), **_mode_options()
    )


class WireParams(_Strict):
    rate: str | None = Field(default=None, description="e.g. 10gbit, 100mbit (default: unshaped)")
    mtu: int | None = Field(default=None, ge=68, le=65535)

    _rate = _parsed_by(parse_rate, "rate")


class WireSpec(_Strict):
    """A cable (two endpoints) or a switch (one, or three and more) between hosts' NICs ``HOST:NIC``."""

    endpoints: list[Endpoint] = Field(min_length=1)
    params: WireParams = Field(default_factory=WireParams)
    ipv4: list[str | None] | None = None

    @field_validator("ipv4")
    @classmethod
    def _addresses(cls, value):
        for cidr in value or []:
            if cidr is None:
                continue
            try:
                ipaddress.IPv4Interface(cidr)
            except ValueError:
                raise ValueError(f"'{cidr}' is not an IPv4 address with a prefix length, e.g. 10.1.0.1/24") from None
            if "/" not in cidr:
                raise ValueError(f"'{cidr}' needs a prefix length, e.g. {cidr}/24")
        return value


class HostSpec(_Strict):
    """An emulated physical machine: a namespace whose NICs come from ``wires:``."""

    sysctls: dict[str, str | int] = Field(default_factory=dict, description="net.* sysctls of the host")

    _net_only = _parsed_by(_net_sysctls, "sysctls")


class ServerSpec(_Strict):
    """A machine a lab is split across (docs/servers.md): reached over SSH, running nestlab itself."""

    address: str = Field(description="where SSH reaches it (name or IP)")
    user: str = Field(default="root", description="SSH user (nestlab runs as root there)")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port")
    key: str | None = Field(default=None, description="SSH identity file (relative to the file that names it)")
    weight: float = Field(default=1.0, gt=0, description="its share of the nodes, relative to the other servers'")
    nestlab: str = Field(default="nestlab", description="the nestlab command on that server")
    underlay: str | None = Field(default=None, description="its IPv4 address for VXLAN between servers (default: address)")
    ssh_options: list[str] = Field(default_factory=list, description="extra ssh -o options, e.g. UserKnownHostsFile=...")

    @field_validator("underlay")
    @classmethod
    def _underlay(cls, value):
        if value is not None:
            ipaddress.IPv4Address(value)
        return value


class Stitch(_Strict):
    """How links cut between servers are joined: VXLAN on ``port``, VNIs counted from ``vni``."""

    port: int = Field(default=4789, ge=1, le=65535, description="UDP port of the VXLAN tunnels between servers")
    vni: int = Field(default=100000, ge=1, le=16000000, description="the first VNI of the lab's range (one per cut link)")
    mtu: int = Field(default=1500, ge=1280, le=65535, description="the underlay's MTU; stitched links get 50 bytes less")


class ScheduledChange(_Strict):
    """One timed change at ``at`` (from the start of ``nestlab run``).

    A ``link``: what to ``set`` and/or its ``state``, or ``action: remove|add``.
    A ``node``: ``action: stop`` (processes frozen, interfaces down) or ``start``.
    """

    at: str
    link: list[str] | None = Field(default=None, min_length=2, max_length=2)
    node: str | None = None
    action: Literal["add", "remove", "stop", "start"] | None = None
    set: Shape | None = None
    state: Literal["up", "down"] | None = None
    direction: Literal["both", "a", "b"] = "both"

    @model_validator(mode="after")
    def _target(self):
        if (self.link is None) == (self.node is None):
            raise ValueError("give either link: [A, B] or node: NAME")
        if self.node and self.action not in ("stop", "start"):
            raise ValueError("a node change needs action: stop or start")
        if self.link and self.action in ("stop", "start"):
            raise ValueError("links take action: add or remove (or set:/state:)")
        if self.link and not (self.action or self.set or self.state):
            raise ValueError("say what happens to the link: set:, state: or action:")
        return self

    _at = _parsed_by(parse_time, "at")


class Dynamics(_Strict):
    """A MANET whose links follow a time-varying visibility graph (``graph``: a file, see docs/shaping.md).

    Every pair of ``nodes`` gets a point-to-point link ``NODE:v-PEER``, created down; the
    controller brings a pair's link up while the two see each other.
    """

    type: Literal["visibility"] = "visibility"
    graph: str
    nodes: list[str] | None = Field(default=None, description="the mobile nodes (default: every linux node)")
    params: Shape | None = Field(default=None, description="shaping of every radio link, e.g. {rate: 11mbit}")


def _kind_options() -> dict:
    """Every key a node kind owns, and every key it reads on nodes of any kind, with its schema."""
    owned = [item for kind in KINDS.values() for item in (*kind.options.items(), *kind.node_options.items())]
    return {key: (annotation, Field(**field)) for key, (annotation, field) in owned}


if TYPE_CHECKING:  # for the type checker: the common keys, and a kind's own keys as Any

    class NodeSpec(_NodeBase):
        def __getattr__(self, name: str) -> Any: ...
else:
    NodeSpec = create_model("NodeSpec", __base__=_NodeBase, __doc__=_NodeBase.__doc__, **_kind_options())


class TopologyBody(_Strict):
    defaults: NodeSpec = Field(default_factory=NodeSpec)
    kinds: dict[NodeKind, NodeSpec] = Field(default_factory=dict)
    groups: dict[str, NodeSpec] = Field(
        default_factory=dict, description="containerlab's groups: node beats group beats kind beats defaults"
    )
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    links: list[LinkSpec] = Field(default_factory=list)


class MgmtSpec(_Strict):
    """The management network (containerlab's ``mgmt:``): every node's eth0 on a bridge of this machine."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    network: str = Field(default="clab", pattern=NAME_PATTERN, max_length=40, description="labs naming one network share it")
    ipv4_subnet: str = Field(default="172.20.20.0/24", alias="ipv4-subnet")
    ipv6_subnet: str = Field(default="3fff:172:20:20::/64", alias="ipv6-subnet")
    ipv4_gw: str | None = Field(default=None, alias="ipv4-gw", description="the bridge's address (default: the subnet's first)")
    ipv6_gw: str | None = Field(default=None, alias="ipv6-gw")
    ipv4_range: str | None = Field(default=None, alias="ipv4-range", description="automatic addresses come from here")
    ipv6_range: str | None = Field(default=None, alias="ipv6-range")
    bridge: str | None = Field(default=None, max_length=IFNAMSIZ, description="the bridge's name (default: br-NETWORK)")
    mtu: int = Field(default=1500, ge=68, le=65535)
    external_access: bool = Field(default=True, alias="external-access", description="nodes reach out through NAT")
    skip_when_unused: bool = Field(default=False, alias="skip-when-unused")
    driver_opts: dict[str, str] = Field(default_factory=dict, alias="driver-opts")


class Topology(_Strict):
    """A whole lab: its ``name``, the subnet pool for automatic addresses and the ``topology``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=40)
    mgmt: MgmtSpec | None = Field(default=None, description="the management network; on for containerlab files")
    prefix: str | None = Field(
        default=None, description="containerlab's long names: PREFIX-LAB-NODE (default clab; empty: NODE)", max_length=40
    )

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        """A container name's characters (Docker's rule for containerlab's): it names /run/netns files and
        /etc/hosts and ssh config lines; "" and "__lab-name" are containerlab's special values."""
        if value is None or value in ("", "__lab-name") or re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
            return value
        raise ValueError(f"{value!r} may hold only letters, digits, '_', '.' and '-', the first a letter or digit")

    ipv4_pool: str | None = DEFAULT_IPV4_POOL
    allow_host_interfaces: bool = Field(
        default=False, description="let parent: name a real interface of this machine (never needed for emulated hosts)"
    )
    allow_host_ports: bool = Field(default=False, description="forward nodes' ports: from this machine's loopback (127.0.0.1)")
    ipv6: bool | Literal["auto", "quiet"] = Field(
        default="auto",
        description="hosts' IPv6: true (link-local addresses, the kernel's defaults), quiet (none until a command adds one), "
        "false (off); auto: quiet unless the lab uses IPv6 (docs/performance.md)",
    )
    _hosts_ipv6: bool | str = PrivateAttr(default=True)  # ipv6: with auto worked out (model/ipv6.py), set by the loader

    @property
    def hosts_ipv6(self) -> bool | str:
        """``ipv6:`` with ``auto`` worked out: True, "quiet" or False (model/ipv6.py)."""
        return self._hosts_ipv6

    hosts: dict[str, HostSpec] = Field(default_factory=dict)
    servers: dict[str, ServerSpec] = Field(
        default_factory=dict, description="machines the lab is split across (or --servers FILE)"
    )
    stitch: Stitch = Field(default_factory=Stitch, description="VXLAN between servers")
    wires: list[WireSpec] = Field(default_factory=list)
    topology: TopologyBody
    schedule: list[ScheduledChange] = Field(default_factory=list, description="timed link changes played by nestlab run")
    dynamics: Dynamics | None = None
    checks: list[Check] = Field(default_factory=list, description="assertions that the lab works (nestlab check, docs/checks.md)")

    @field_validator("ipv4_pool")
    @classmethod
    def _pool(cls, value):
        if value is not None:
            try:
                ipaddress.IPv4Network(value)
            except ValueError as exc:
                raise ValueError(f"'{value}' is not an IPv4 network such as 10.200.0.0/16 ({exc})") from None
        return value


ALLOWED_KEYS: dict[str, list[str]] = {
    "top": [*(f.alias or n for n, f in Topology.model_fields.items()), *IGNORED_TOP_KEYS],
    "mgmt": [f.alias or n for n, f in MgmtSpec.model_fields.items()],
    "body": list(TopologyBody.model_fields),
    "node": [*(f.alias or n for n, f in NodeSpec.model_fields.items() if n != "component_of"), *IGNORED_NODE_KEYS],
    "link": [*LinkSpec.model_fields, *IGNORED_LINK_KEYS],
    "wire": list(WireSpec.model_fields),
    "params": list(WireParams.model_fields),
    "shape": list(LinkParams.model_fields),
    "schedule": list(ScheduledChange.model_fields),
    "check": list(Check.model_fields),
    "dynamics": list(Dynamics.model_fields),
    "host": list(HostSpec.model_fields),
    "server": list(ServerSpec.model_fields),
    "stitch": list(Stitch.model_fields),
    "resources": list(Resources.model_fields),
    "stage": [f.alias or n for n, f in StageSpec.model_fields.items()],
    "healthcheck": [f.alias or n for n, f in Healthcheck.model_fields.items()],
    "component": list(ComponentSpec.model_fields),
}
