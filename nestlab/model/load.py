"""Turn a topology file (or a dict built in Python) into a checked :class:`Topology`."""

from __future__ import annotations

import copy
import glob
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..names import IFNAMSIZ, is_ifname
from ..registry import KINDS
from . import files, images, ipv6, mgmt, shape_keys
from .binds import resolve_binds
from .endpoint import Endpoint
from .errors import Path, Problem, TopologyError
from .formats import clab, gotemplate, kathara
from .modes import check_modes, node_kind
from .nesting import expand, is_flat
from .overrides import Overrides
from .paths import expand_paths
from .ports import check_ports
from .schema import ALLOWED_KEYS, IGNORED_TOP_KEYS, Topology
from .schema.base import NAME_PATTERN
from .schema.links import IGNORED_LINK_KEYS, LinkSpec
from .schema.nodes import IGNORED_NODE_KEYS
from .servers import check_servers
from .stages import check_stages
from .yamlsource import Located, load_yaml, read_owned_source


@dataclass
class Loaded:
    """A valid topology plus notices about keys that were accepted but ignored."""

    topology: Topology
    source: str
    notices: list[Problem] = field(default_factory=list)
    located: Located | None = None  # where each key came from, for problems found later (planning)
    author: int | None = None  # the uid owning the topology file as read (who wrote the lab); None: not a file's


def load_file(
    path: str | os.PathLike[str], vars_files: Sequence[str | FsPath] = (), overrides: Overrides | None = None
) -> Loaded:
    """A topology file, or a Kathará lab (its folder or its lab.conf).  A file holding Go template actions is
    rendered first with the variables of ``vars_files`` (as containerlab's ``--vars``), or else of the
    ``NAME_vars.yml``/``.yaml``/``.json`` files beside it (``NAME``: the file name without its last extension)."""
    if kathara.is_lab(path):
        located, source, notes, author = kathara.load(path)
        loaded = load_data(located, source, overrides)
        loaded.notices[:0] = notes
    else:
        path = FsPath(path)
        text, author = read_owned_source(path, stream=True)  # the topology may come on standard input (-t /dev/stdin)
        if clab.template_line(text) is None:
            loaded = load_text(text, str(path), overrides=overrides)
        else:
            found = [FsPath(f) for f in vars_files] or sorted(
                f for f in path.parent.glob(f"{glob.escape(path.stem)}_vars.*") if f.suffix in (".yaml", ".yml", ".json")
            )
            beside = None if vars_files else author  # found beside it, not named: its author's (or root's) alone
            loaded = load_text(text, str(path), _template_vars(found, beside), [str(f) for f in found], overrides)
    loaded.author = author
    return loaded


def load_text(
    text: str,
    source: str = "<topology>",
    template_vars: Any = None,
    vars_files: Sequence[str] = (),
    overrides: Overrides | None = None,
) -> Loaded:
    """A topology given as text; Go template actions in it are rendered with ``template_vars`` first."""
    line = clab.template_line(text)
    if line is None:
        return load_data(load_yaml(clab.expand_env(text), source), source, overrides)
    try:
        text = gotemplate.render(text, template_vars)
    except gotemplate.TemplateError as exc:
        raise TopologyError(source, [Problem((), f"Go template: {exc}", exc.line, 1)]) from None
    try:
        loaded = load_data(load_yaml(clab.expand_env(text), source), source, overrides)
    except TopologyError as exc:
        raise TopologyError(
            f"{source} (as rendered from its Go template; lines count in the rendered text)", exc.problems
        ) from None
    used = f"variables from {', '.join(vars_files)}" if vars_files else "no variables file (NAME_vars.yml beside it, or --vars)"
    loaded.notices.insert(0, Problem((), f"rendered as a Go template with {used}", line, 1))
    return loaded


def _template_vars(files: list[FsPath], author: int | None = None) -> Any:
    """The variables of containerlab's vars files, merged in order (None, Go's nil, without any).  Files found beside
    the topology (``author``: the uid owning it) are read through no link and only if the topology's owner or this
    user owns them: in a folder others may write (/tmp), another user could put one there and so write root's lab."""
    merged: Any = None
    for file in files:
        text, owner = read_owned_source(file, "the template variables", follow=author is None)
        if author is not None and owner not in (author, os.geteuid()):
            why = f"owned by uid {owner}, not by the topology's owner (uid {author}) nor this user"
            raise TopologyError(str(file), [Problem((), f"template variables not read: {why}; give them with --vars")])
        data = load_yaml(text, str(file)).data if text.strip() else None  # its problems at their line and column
        if data is not None and not isinstance(data, dict):
            raise TopologyError(str(file), [Problem((), "template variables must be a mapping (name: value)", 1, 1)])
        merged = _merge(merged or {}, data or {})
    return merged


def _merge(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    out = dict(into)
    for key, value in more.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_data(located: Located | dict[str, Any], source: str = "<python>", overrides: Overrides | None = None) -> Loaded:
    """Validate plain data (changed first as ``overrides`` say); positions are used for messages when ``located`` carries them."""
    if not isinstance(located, Located):
        located = Located(located)
    data = located.data
    if not isinstance(data, dict):
        raise TopologyError(source, [located.problem((), "the top level must be a mapping with `name:` and `topology:`")])
    if overrides:
        overrides.apply(data)
    notices: list[Problem] = []
    managed = data.get("mgmt") is not None or source.endswith(clab.FILE_ENDINGS)
    folder = os.path.dirname(source) if os.path.exists(source) else "."
    data, problems = clab.normalize(data, located, notices, managed, folder)
    if problems:
        raise TopologyError(source, problems)
    if source.endswith(clab.FILE_ENDINGS) and "ipv4_pool" not in data:
        data = {**data, "ipv4_pool": None}  # containerlab addresses no link by itself
    if source.endswith(clab.FILE_ENDINGS) and data.get("mgmt") is None:
        data = {**data, "mgmt": {}}  # containerlab's management network is always there
    data = _strip_ignored(data, located, notices)
    try:
        topology = Topology.model_validate(data)
    except ValidationError as exc:
        raise TopologyError(source, [_problem(err, located) for err in exc.errors()]) from None
    topology._hosts_ipv6 = ipv6.resolve(data)  # noqa: SLF001 - the loader is the one to work it out
    problems = (
        apply_groups(topology, located)
        or expand(topology, located)
        or expand_paths(topology, located)
        or check(topology, located)
        or check_stages(topology, located)
        or check_ports(topology, located, notices)
        or check_servers(topology, located)
        or mgmt.check(topology, located)
    )
    if not problems:
        problems = (
            images.resolve_paths(topology, source, located, notices)
            + resolve_binds(topology, source, located, notices)
            + _resolve_traces(topology, source, located)
            + _graph_exists(topology, source, located)
        )
    if problems:
        raise TopologyError(source, problems)
    return Loaded(topology, source, notices + mgmt.notes(topology, located), located)


def _resolve_traces(topology: Topology, source: str, located: Located) -> list[Problem]:
    """Make each link's ``trace:`` absolute (relative to the topology file) and check it reads."""
    base = FsPath(source).parent if os.path.exists(source) else FsPath.cwd()
    problems = []
    for i, link in enumerate(topology.topology.links):
        params = link.params
        for side, shape in (((), params), (("a",), params and params.a), (("b",), params and params.b)):
            if shape is None or shape.trace is None:
                continue
            path = ("topology", "links", i, "params", *side, "trace")
            full = (base / os.path.expanduser(shape.trace)).resolve()
            try:
                shape_keys.CHECKS["trace"](str(full))  # the check `link set --trace` makes
            except ValueError as exc:
                problems.append(located.problem(path, f"trace {exc}"))
                continue
            if shape.rate is not None:
                problems.append(located.problem(path, "a trace sets the rate itself: drop rate: (or trace:)"))
            shape.trace = str(full)
    return problems


def _graph_exists(topology: Topology, source: str, located: Located) -> list[Problem]:
    """``dynamics.graph`` names a file (relative to the topology's folder)."""
    graph = topology.dynamics and topology.dynamics.graph
    if not graph:
        return []
    full = FsPath(graph) if FsPath(graph).is_absolute() else FsPath(source).parent / graph
    return (
        []
        if files.is_file(full)
        else [located.problem(("dynamics", "graph"), f"the visibility graph '{graph}' does not exist (looked for {full})")]
    )


def _drop(
    mapping: dict[str, Any], ignored: dict[str, str], path: Path, located: Located, notices: list[Problem]
) -> dict[str, Any]:
    kept = {}
    for key, value in mapping.items():
        if key in ignored:
            notices.append(located.problem(path + (key,), f"ignored: {ignored[key]}", key=True))
        else:
            kept[key] = value
    return kept


def _strip_ignored(data: dict[str, Any], located: Located, notices: list[Problem]) -> dict[str, Any]:
    """Remove containerlab keys nestlab does not use yet, noting each one."""
    data = _drop(data, IGNORED_TOP_KEYS, (), located, notices)
    body = data.get("topology")
    if not isinstance(body, dict):
        return data
    body = dict(body)
    for section in ("nodes", "kinds", "groups"):
        if isinstance(body.get(section), dict):
            body[section] = {
                name: _drop(spec, IGNORED_NODE_KEYS, ("topology", section, name), located, notices)
                if isinstance(spec, dict)
                else spec
                for name, spec in body[section].items()
            }
    if isinstance(body.get("defaults"), dict):
        body["defaults"] = _drop(body["defaults"], IGNORED_NODE_KEYS, ("topology", "defaults"), located, notices)
    if isinstance(body.get("links"), list):
        body["links"] = [
            _drop(link, IGNORED_LINK_KEYS, ("topology", "links", i), located, notices) if isinstance(link, dict) else link
            for i, link in enumerate(body["links"])
        ]
    return {**data, "topology": body}


# The keys allowed where a path leads: by the section it starts in, else by a key on the way (a node's otherwise).
_SECTION_KEYS = {"hosts": "host", "servers": "server", "mgmt": "mgmt", "stitch": "stitch"}
_WITHIN_KEYS = {"resources": "resources", "healthcheck": "healthcheck", "stages": "stage", "components": "component"}


def _allowed_for(path: Path) -> list[str]:
    if not path:
        return ALLOWED_KEYS["top"]
    if path == ("topology",):
        return ALLOWED_KEYS["body"]
    if path[:2] == ("topology", "links"):
        return ALLOWED_KEYS["shape" if "params" in path else "link"]
    if path[:1] == ("wires",):
        return ALLOWED_KEYS["params" if path[-1] == "params" else "wire"]
    if path[:1] == ("dynamics",):
        return ALLOWED_KEYS["shape" if "params" in path else "dynamics"]
    if path[:1] == ("schedule",):
        return ALLOWED_KEYS["shape" if "set" in path else "schedule"]
    if path[0] in _SECTION_KEYS:
        return ALLOWED_KEYS[_SECTION_KEYS[str(path[0])]]
    within = next((_WITHIN_KEYS[key] for key in _WITHIN_KEYS if key in path), "node")
    return ALLOWED_KEYS[within]


def _problem(err: ErrorDetails, located: Located) -> Problem:
    path = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        allowed = ", ".join(_allowed_for(path[:-1]))
        return located.problem(path, f"unknown key '{path[-1]}'; allowed here: {allowed}", key=True)
    if err["type"] == "missing":
        return located.problem(path, f"'{path[-1]}' is required")
    if err["type"] == "literal_error":
        return located.problem(path, f"{err['msg'][:1].lower()}{err['msg'][1:]} (got {err['input']!r})")
    if err["type"] == "string_pattern_mismatch":
        return located.problem(
            path, f"{err['input']!r} may use only letters, digits, '-' and '_', starting with a letter or digit"
        )
    message = err["msg"].removeprefix("Value error, ")
    return located.problem(path, message)


def apply_groups(topology: Topology, located: Located) -> list[Problem]:
    """containerlab's ``groups``: a node takes every key its group sets and it does not (node > group > kind > defaults).
    A ``group:`` that ``groups:`` does not define is only a name (containerlab's inspect, graph and inventories
    show it; netlab writes ``group: netlab_no_reload,...``), as with containerlab."""
    body = topology.topology
    for spec in body.nodes.values():
        group = body.groups.get(spec.group) if spec.group is not None else None
        if group is None:
            continue
        for key in group.model_fields_set - spec.model_fields_set:
            setattr(spec, key, copy.deepcopy(getattr(group, key)))
            spec.model_fields_set.add(key)
    return []


def check(topology: Topology, located: Located) -> list[Problem]:
    """Cross-field rules pydantic cannot express: names, endpoints, addresses."""
    problems = _check_node_names(topology, located)
    used: dict[tuple[str, str], Path] = {}
    seen_addr: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, Path] = {}
    for i, link in enumerate(topology.topology.links):
        problems += _check_endpoints(topology, located, i, link, used)
        problems += _check_addresses(topology, located, i, link, seen_addr)
    return problems + check_modes(topology, located) + _check_schedule(topology, located) + _check_checks(topology, located)


def _check_node_names(topology: Topology, located: Located) -> list[Problem]:
    """Node names (components' are checked with their node): letters, digits, '-', '_'; a bridge's fits an interface name."""
    problems: list[Problem] = []
    for name, spec in topology.topology.nodes.items():
        path = ("topology", "nodes", name)
        if spec.component_of:
            continue
        if not re.match(NAME_PATTERN, name):
            problems.append(located.problem(path, f"node name '{name}' may use only letters, digits, '-' and '_'"))
        elif KINDS.get(node_kind(topology, name)).own_bridge and len(name) > IFNAMSIZ:
            problems.append(
                located.problem(
                    path, f"a bridge is a kernel interface named after its node: '{name}' is longer than {IFNAMSIZ} characters"
                )
            )
    return problems


def _check_endpoints(
    topology: Topology, located: Located, i: int, link: LinkSpec, used: dict[tuple[str, str], Path]
) -> list[Problem]:
    """Link ``i``'s endpoints: NODE:INTERFACE of a defined node, each interface on one link only
    (``used``: ``(node, interface)`` -> the link that took it, filled here)."""
    base = ("topology", "links", i)
    problems: list[Problem] = []
    for j, endpoint in enumerate(link.endpoints):
        why = _endpoint_problem(topology, endpoint, used)
        if why is None:
            used[endpoint.key] = base
            why = _shared_stack_problem(topology, endpoint.key, used, base)
        if why:
            problems.append(located.problem(base + ("endpoints", j), why))
    return problems


def _endpoint_problem(topology: Topology, endpoint: Endpoint, used: dict[tuple[str, str], Path]) -> str | None:
    """What is wrong with one endpoint on its own, or with its interface being used before (None: nothing)."""
    body = topology.topology
    node, iface = endpoint.key
    if not endpoint.whole:
        return f"endpoint '{endpoint}' must look like NODE:INTERFACE, e.g. h1:eth1"
    if node not in body.nodes:
        known = ", ".join(body.nodes) or "none"
        return f"node '{node}' is not defined under topology.nodes (defined: {known})"
    if not is_ifname(iface) or iface == "lo":
        return f"interface name '{iface}' must be 1-{IFNAMSIZ} characters of letters, digits, '.', '-', '_' (and not 'lo')"
    if (node, iface) in used:
        return f"endpoint '{endpoint}' is already used by {_link_ref(used[(node, iface)])}; each interface joins one link"
    return None


def _shared_stack_problem(topology: Topology, key: tuple[str, str], used: dict[tuple[str, str], Path], base: Path) -> str | None:
    """With nesting: flat, a node's components share its stack, so its interface names: the interface once there."""
    node, iface = key
    stack = topology.topology.nodes[node].component_of
    if stack is None or not is_flat(topology, node):  # flat: a component, so its node's stack
        return None
    if (stack, iface) in used:
        return (
            f"with nesting: flat, {stack}'s components share one network stack and '{iface}' is already used there by "
            f"{_link_ref(used[(stack, iface)])}; give each interface of the node a different name"
        )
    used[(stack, iface)] = base
    return None


def _check_addresses(
    topology: Topology,
    located: Located,
    i: int,
    link: LinkSpec,
    seen_addr: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, Path],
) -> list[Problem]:
    """Link ``i``'s ipv4/ipv6 lists: one entry per endpoint, each a host address held once in the lab
    (``seen_addr``: address -> the link holding it, filled here)."""
    base = ("topology", "links", i)
    problems: list[Problem] = []
    for family in ("ipv4", "ipv6"):
        addrs = getattr(link, family)
        if addrs is None:
            continue
        if len(addrs) != len(link.endpoints):
            problems.append(
                located.problem(
                    base + (family,),
                    f"{family} needs one entry per endpoint ({len(link.endpoints)}); use null for none/automatic",
                )
            )
            continue
        for j, (endpoint, cidr) in enumerate(zip(link.endpoints, addrs)):
            if cidr is None:
                continue
            path = base + (family, j)
            why = _address_problem(topology, endpoint, cidr, family, seen_addr, path)
            if why:
                problems.append(located.problem(path, why))
    return problems


def _address_problem(
    topology: Topology,
    endpoint: Endpoint,
    cidr: str,
    family: str,
    seen_addr: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, Path],
    path: Path,
) -> str | None:
    """What is wrong with one endpoint's address (None: nothing; the address is then recorded in ``seen_addr``)."""
    body = topology.topology
    node = endpoint.node
    if node in body.nodes and KINDS.get(node_kind(topology, node)).switch:
        return f"'{endpoint}' is a switch port and cannot hold an address; use null"
    ip, why = _parse_cidr(cidr, family)
    if ip is None:  # then why says why
        return why
    if ip.ip == ip.network.network_address and ip.network.prefixlen < ip.max_prefixlen - 1:
        return f"'{cidr}' is the network address of {ip.network}; pick a host address"
    if endpoint.endswith(":eth0") and body.nodes[node].component_of:
        return None  # a component's address on its node's internal switch: the same in every node
    if ip.ip in seen_addr:
        return f"address {ip.ip} is already assigned by {_link_ref(seen_addr[ip.ip])}"
    seen_addr[ip.ip] = path[:3]
    return None


def _check_schedule(topology: Topology, located: Located) -> list[Problem]:
    """A schedule names nodes and links of the file (found at load, not when ``nestlab run`` reaches them).
    Links made later from the file (``paths:`` fans, ``dynamics:`` radio links) are left to the run."""
    body = topology.topology
    if topology.dynamics or any(link.paths for link in body.links):
        return []
    pairs = {frozenset(link.endpoints) for link in body.links if len(link.endpoints) == 2}
    problems = []
    for i, change in enumerate(topology.schedule):
        if change.node is not None and change.node not in body.nodes:
            problems.append(located.problem(("schedule", i, "node"), f"node '{change.node}' is not under topology.nodes"))
        if change.link and frozenset(change.link) not in pairs:
            problems.append(
                located.problem(("schedule", i, "link"), f"no link of the file joins {change.link[0]} and {change.link[1]}")
            )
    return problems


def _check_checks(topology: Topology, located: Located) -> list[Problem]:
    """A check names nodes of the file."""
    nodes = topology.topology.nodes
    problems = []
    for i, check in enumerate(topology.checks):
        for key in ("from", "node"):
            name = getattr(check.spec, "source" if key == "from" else "node", None)
            if name is not None and name not in nodes:
                problems.append(located.problem(("checks", i, check.kind, key), f"node '{name}' is not under topology.nodes"))
        to = getattr(check.spec, "to", None)
        if to is not None and not _is_address(to) and to.split(":", 1)[0] not in nodes:
            problems.append(
                located.problem(
                    ("checks", i, check.kind, "to"),
                    f"'{to}' is neither an address nor a node (NODE or NODE:IF) under topology.nodes",
                )
            )
    return problems


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _parse_cidr(cidr: str, family: str) -> tuple[ipaddress.IPv4Interface | ipaddress.IPv6Interface | None, str | None]:
    """(interface, None) for a valid address with prefix of ``family``, else (None, why)."""
    try:
        ip = ipaddress.ip_interface(cidr)
    except ValueError:
        return None, f"'{cidr}' is not an address with a prefix length, e.g. 10.0.0.1/24"
    if "/" not in cidr:
        return None, f"'{cidr}' needs a prefix length, e.g. {cidr}/{ip.max_prefixlen if family == 'ipv6' else 24}"
    if f"ipv{ip.version}" != family:
        return None, f"'{cidr}' is not an {family.replace('ip', 'IP')} address"
    return ip, None


def _link_ref(path: Path) -> str:
    return f"topology.links[{path[2]}]"
