"""containerlab's spellings rewritten into nestlab's before the schema sees them.

* a file named ``*clab.yml`` (``.yaml``, ``.gotmpl``; netlab writes ``clab.yml``) gets no automatic link addresses unless it
  sets ``ipv4_pool``: containerlab addresses only what the file (or its exec) addresses;
* ``${VAR}``, ``${VAR:=default}``, ``${VAR:-default}`` in the file text come from the environment;
  a Go template (``{{ .var }}``) is rendered first (gotemplate.py, with its vars file);
* node ``cpu``/``memory``/``cpu-set`` become ``resources``; an empty node (``n1:``) is ``{}``; ``env-files``
  (relative to the file's folder) are read into ``env`` (``env:`` beats them); SR-SIM's ``components:`` list
  is dropped with a note (nestlab's components are a mapping);
* a bridge inside a node (``BRIDGE|NODE``) is made by NODE's first exec commands;
* special endpoints: ``host:IF`` (a veth to this machine, mode: host), ``mgmt-net:IF`` (a port of
  the management network's bridge, its end here named IF; without a management network, a ``kind:
  bridge`` node named mgmt-net), ``macvlan:PARENT``
  (mode: macvlan on this machine's interface PARENT, taken as containerlab takes it: no flag needed,
  a note says where its traffic leaves; ``allow_host_interfaces: false`` refuses it, a missing PARENT is an error);
* the extended link form (``type: veth|veth-stitch|host|mgmt-net|macvlan|vxlan|vxlan-stitch|dummy`` with ``endpoint(s)``,
  every key of containerlab's schema/clab.schema.json): an endpoint's ``mac``, ``ipv4`` and ``ipv6`` go to
  the link's ``macs``, ``ipv4`` and ``ipv6``; ``type: vxlan`` and ``vxlan-stitch`` are mode vxlan-remote,
  their ``dst-port`` its ``port`` and ``src-port`` its ``src_port``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ...names import IFNAMSIZ, is_ifname
from .. import files
from ..errors import Path as KeyPath
from ..errors import Problem
from ..yamlsource import Located

FILE_ENDINGS = (
    "clab.yml",
    "clab.yaml",
    "clab.gotmpl",
)  # containerlab's names (X.clab.yml, netlab's clab.yml): no automatic link addresses
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}")
MGMT = "mgmt-net"
_RESOURCES = {"cpu": "cpus", "memory": "memory", "cpu-set": "cpuset"}
_SPECIAL = ("host", MGMT, "macvlan")


def expand_env(text: str) -> str:
    """containerlab's environment substitution: ``${VAR}``, ``${VAR:-default}``, ``${VAR:=default}``."""

    def sub(match: re.Match[str]) -> str:
        name, op, default = match.groups()
        value = os.environ.get(name)
        if op and (value is None or (op.startswith(":") and value == "")):
            return str(default)
        return value or ""

    return _ENV.sub(sub, text)


def template_line(text: str) -> int | None:
    """The first line holding a Go template action, if any."""
    for number, line in enumerate(text.splitlines(), 1):
        if "{{" in line and "}}" in line and not line.lstrip().startswith("#"):
            return number
    return None


def normalize(
    data: dict[str, Any], located: Located, notices: list[Problem], managed: bool = False, folder: str = "."
) -> tuple[dict[str, Any], list[Problem]]:
    """Rewrite containerlab forms in ``data`` (a topology file's top level); returns it and any problems.
    ``managed``: the lab has a management network, which ``mgmt-net:IF`` endpoints are ports of;
    ``folder``: the file's, where relative ``env-files`` are."""
    body = data.get("topology")
    if not isinstance(body, dict):
        return data, []
    body = dict(body)
    problems: list[Problem] = []
    machine_parents = False
    if isinstance(body.get("nodes"), dict):
        body["nodes"] = {name: {} if spec is None else spec for name, spec in body["nodes"].items()}
        inside = [name for name in body["nodes"] if isinstance(name, str) and "|" in name]
        if inside:
            _bridges_in_nodes(body, inside, located, notices, problems)

    def node_like(spec: Any, path: KeyPath) -> Any:
        return _node(spec, path, folder, located, notices, problems)

    for section in ("nodes", "kinds", "groups"):
        if isinstance(body.get(section), dict):
            body[section] = {name: node_like(spec, ("topology", section, name)) for name, spec in body[section].items()}
    if isinstance(body.get("defaults"), dict):
        body["defaults"] = node_like(body["defaults"], ("topology", "defaults"))
    if isinstance(body.get("links"), list):
        machine_parents = _links(data, body, located, notices, problems, managed)
    if machine_parents and "allow_host_interfaces" not in data:
        data = {**data, "allow_host_interfaces": True}
    return {**data, "topology": body}, problems


def _links(
    data: dict[str, Any], body: dict[str, Any], located: Located, notices: list[Problem], problems: list[Problem], managed: bool
) -> bool:
    """``body``'s links rewritten (and the management bridge added where ``mgmt-net:IF`` endpoints need one);
    whether any link's parent is the machine's own interface."""
    links, machine_parents = [], False
    defined = set(body.get("nodes") or {}) if isinstance(body.get("nodes"), dict) else set()
    for i, link in enumerate(body["links"]):
        if isinstance(link, dict):
            link = _link(link, ("topology", "links", i), located, notices, problems, defined, managed)
        if isinstance(link, dict) and link.pop("_real_parent", False):
            machine_parents = True
            _machine_parent(data, link["parent"], ("topology", "links", i, "endpoints"), located, notices, problems)
        if link is not None:
            links.append(link)
    body["links"] = links
    uses_mgmt = any(
        isinstance(ep, str) and ep.startswith(MGMT + ":")
        for ln in links
        if isinstance(ln, dict)
        for ep in ln.get("endpoints") or []
    )
    if uses_mgmt and not managed and isinstance(body.get("nodes"), dict) and MGMT not in body["nodes"]:
        body["nodes"] = {**body["nodes"], MGMT: {"kind": "bridge"}}
    return machine_parents


def _machine_parent(
    data: dict[str, Any], parent: str, path: KeyPath, located: Located, notices: list[Problem], problems: list[Problem]
) -> None:
    """containerlab's ``macvlan:PARENT``: this machine's interface, refused only when the file says
    ``allow_host_interfaces: false`` or the machine has no such interface (containerlab fails there too)."""
    if data.get("allow_host_interfaces") is False:
        problems.append(
            located.problem(
                path,
                f"macvlan:{parent} would attach the node to this machine's interface {parent}, "
                "and the file says allow_host_interfaces: false",
            )
        )
    elif not os.path.exists(f"/sys/class/net/{parent}"):
        present = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
        problems.append(
            located.problem(
                path,
                f"macvlan:{parent}: this machine has no interface {parent} (it has {', '.join(present[:8])}"
                f"{', ...' if len(present) > 8 else ''}); name one of them",
            )
        )
    else:
        notices.append(
            located.problem(
                path,
                f"macvlan:{parent}: the node's traffic leaves this machine on {parent}, as with containerlab "
                "(allow_host_interfaces: false refuses this)",
            )
        )


def _bridges_in_nodes(
    body: dict[str, Any], inside: list[str], located: Located, notices: list[Problem], problems: list[Problem]
) -> None:
    """containerlab's ``BRIDGE|NODE`` (kind: bridge, network-mode: container:NODE): a bridge inside NODE's
    namespace.  The links' ``BRIDGE|NODE:IF`` ends become ``NODE:IF``, and NODE's exec starts by making the
    bridge and enslaving them (shown as NODE's first exec commands; the bridge goes with the namespace)."""
    nodes = dict(body["nodes"])
    for name in inside:
        bridge, _, owner = name.partition("|")
        path = ("topology", "nodes", name)
        spec = nodes.pop(name)
        if not isinstance(spec, dict) or spec.get("kind") != "bridge" or owner not in nodes:
            problems.append(
                located.problem(
                    path,
                    f"'{name}' is containerlab's bridge-inside-a-node form: it needs kind: bridge and a node '{owner}'",
                    key=True,
                )
            )
            continue
        if not is_ifname(bridge):
            problems.append(
                located.problem(
                    path,
                    f"'{bridge}' is not a bridge name the kernel takes (1-{IFNAMSIZ} letters, digits, '.', '-', '_')",
                    key=True,
                )
            )
            continue
        ports = []
        for link in body.get("links") or []:
            if isinstance(link, dict) and isinstance(link.get("endpoints"), list):
                for j, ep in enumerate(link["endpoints"]):
                    text = f"{ep.get('node')}:{ep.get('interface')}" if isinstance(ep, dict) else ep
                    if isinstance(text, str) and text.startswith(name + ":"):
                        ports.append(text.partition(":")[2])
                        link["endpoints"][j] = f"{owner}:{ports[-1]}"
        made = [
            f"ip link add {bridge} type bridge",
            f"ip link set {bridge} up",
            *(f"ip link set {port} master {bridge} up" for port in ports),
        ]
        host = dict(nodes[owner] or {})
        host["exec"] = made + list(host.get("exec") or [])
        nodes[owner] = host
        notices.append(
            located.problem(
                path,
                f"the bridge {bridge} is made inside {owner} by {owner}'s first exec commands "
                f"(ports: {', '.join(ports) or 'none'})",
                key=True,
            )
        )
    body["nodes"] = nodes


def _node(spec: Any, path: KeyPath, folder: str, located: Located, notices: list[Problem], problems: list[Problem]) -> Any:
    """One node (or kinds/groups/defaults entry) with containerlab's node keys in nestlab's form."""
    if not isinstance(spec, dict):
        return spec
    spec = _resources(spec)
    if isinstance(spec.get("components"), list):  # SR-SIM's cards, not nestlab's nested containers
        spec = {k: v for k, v in spec.items() if k != "components"}
        notices.append(
            located.problem(
                path + ("components",),
                "ignored: a components: list describes a vendor chassis's cards (SR-SIM); nestlab's components are "
                "a mapping of nested containers (docs/nesting.md)",
                key=True,
            )
        )
    if spec.get("runtime") == "podman":
        spec = {k: v for k, v in spec.items() if k != "runtime"}
        notices.append(
            located.problem(
                path + ("runtime",),
                "ignored: runtime: podman: the node runs as namespaces (runtime: docker runs an image with Docker)",
                key=True,
            )
        )
    if "env-files" in spec:
        spec = dict(spec)
        named = spec.pop("env-files")
        env = _env_files(named if isinstance(named, list) else [named], path + ("env-files",), folder, located, problems)
        spec["env"] = {**env, **(spec.get("env") or {})}
    return spec


def _env_files(given: list[Any], path: KeyPath, folder: str, located: Located, problems: list[Problem]) -> dict[str, str]:
    """containerlab's ``env-files``: ``KEY=VALUE`` lines (``#`` comments and blank lines skipped), later files winning."""
    env: dict[str, str] = {}
    for j, name in enumerate(given):
        full = os.path.join(folder, os.path.expanduser(str(name)))
        try:
            lines = files.read_text(full).splitlines()
        except UnicodeDecodeError:
            problems.append(located.problem(path + (j,), f"env file '{name}' is not UTF-8 text"))
            continue
        except OSError as exc:
            problems.append(located.problem(path + (j,), f"env file '{name}' cannot be read ({exc.strerror}; looked for {full})"))
            continue
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, eq, value = line.removeprefix("export ").partition("=")
            if not eq or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key.strip()):
                problems.append(located.problem(path + (j,), f"{name}:{number}: not KEY=VALUE"))
                continue
            env[key.strip()] = value.strip().strip("\"'")
    return env


def _resources(spec: Any) -> Any:
    if not isinstance(spec, dict) or not any(key in spec for key in _RESOURCES):
        return spec
    spec = dict(spec)
    resources = dict(spec.get("resources") or {})
    for key, ours in _RESOURCES.items():
        if key in spec:
            resources.setdefault(ours, spec.pop(key))
    spec["resources"] = resources
    return spec


def _link(
    link: dict[str, Any],
    path: KeyPath,
    located: Located,
    notices: list[Problem],
    problems: list[Problem],
    defined: set[str],
    managed: bool,
) -> dict[str, Any] | None:
    """One link in nestlab's form (None: dropped with a notice)."""
    _endpoint_vars(link, path, located, notices)
    if link.get("type") is not None:
        typed = _typed_link(link, path, located, notices, problems)
        if typed is None:
            return None
        link = typed
    endpoints = link.get("endpoints")
    if not isinstance(endpoints, list):
        return link
    return _machine_end({**link, **_endpoint_keys(endpoints, link)}, defined, managed)


def _typed_link(
    link: dict[str, Any], path: KeyPath, located: Located, notices: list[Problem], problems: list[Problem]
) -> dict[str, Any] | None:
    """A link with containerlab's ``type:`` in nestlab's form, without the type (None: dropped, or not supported)."""
    kind = link["type"]
    link = {k: v for k, v in link.items() if k != "type"}
    if kind == "dummy":
        notices.append(
            located.problem(
                path + ("type",),
                "ignored: a dummy interface has nothing on its other side; add the address to a real link",
                key=True,
            )
        )
        return None
    if kind == "veth-stitch":
        notices.append(
            located.problem(
                path + ("type",),
                "veth-stitch is a veth here: containerlab joins two veths in this machine's namespace so that "
                "tcpdump and tc netem reach them; nestlab captures and shapes a node's own interfaces",
                key=True,
            )
        )
    if kind in _SPECIAL:
        endpoint = link.pop("endpoint", None) or {}
        link["endpoints"] = [endpoint, f"{kind}:{link.pop('host-interface', None)}"]
        if kind == "macvlan" and "mode" in link:
            link["macvlan_mode"] = link.pop("mode")
    elif kind in ("vxlan", "vxlan-stitch"):  # one node's end tunnelled to another machine
        link["endpoints"] = [link.pop("endpoint", None) or {}]
        link["mode"] = "vxlan-remote"
        for theirs, ours in _VXLAN_KEYS.items():
            if theirs in link:
                link[ours] = link.pop(theirs)
    elif kind not in ("veth", "veth-stitch"):
        problems.append(
            located.problem(
                path + ("type",),
                f"type: {kind} links are not supported; nestlab links nodes with veth (and host:, mgmt-net:, macvlan: endpoints, "
                "and type: vxlan to another machine)",
            )
        )
        return None
    return link


def _machine_end(link: dict[str, Any], defined: set[str], managed: bool) -> dict[str, Any]:
    """A link of two ends, one of them ``host:IF``, ``macvlan:IF`` or ``mgmt-net:IF`` (no node of that name), as a
    one-ended link of the matching mode; any other link as it is."""
    endpoints = link["endpoints"]
    words = ("host", "macvlan", MGMT) if managed else ("host", "macvlan")
    special = [
        j
        for j, ep in enumerate(endpoints)
        if isinstance(ep, str) and ep.partition(":")[0] in words and ep.partition(":")[0] not in defined
    ]
    if len(endpoints) != 2 or len(special) != 1:
        return link
    j = special[0]
    kind, _, name = endpoints[j].partition(":")
    kept = {k: v for k, v in link.items() if k not in ("ipv4", "ipv6", "macs")}
    kept["endpoints"] = [endpoints[1 - j]]
    for family in ("ipv4", "ipv6", "macs"):
        if isinstance(link.get(family), list) and len(link[family]) == 2 and link[family][1 - j] is not None:
            kept[family] = [link[family][1 - j]]
    if kind == "host":
        return {**kept, "mode": "machine-veth", "host_interface": name}
    if kind == MGMT:  # a port of the management network's bridge, its end here named as given
        return {**kept, "mode": "mgmt", "host_interface": name}
    return {**kept, "mode": "macvlan", "parent": name, "_real_parent": True}


def _endpoint_vars(link: dict[str, Any], path: KeyPath, located: Located, notices: list[Problem]) -> None:
    """An endpoint's ``vars`` (containerlab's config engine reads them): one note for the link."""
    found: list[KeyPath] = [("endpoint",)] if isinstance(link.get("endpoint"), dict) and "vars" in link["endpoint"] else []
    if isinstance(link.get("endpoints"), list):
        found += [("endpoints", j) for j, ep in enumerate(link["endpoints"]) if isinstance(ep, dict) and "vars" in ep]
    if found:
        notices.append(
            located.problem(
                path + found[0] + ("vars",), "ignored: endpoint vars feed templates, which nestlab does not render", key=True
            )
        )


_VXLAN_KEYS = {"dst-port": "port", "udp-port": "port", "src-port": "src_port"}
_ENDPOINT_KEYS = {"mac": "macs", "ipv4": "ipv4", "ipv6": "ipv6"}


def _endpoint_keys(endpoints: list[Any], link: dict[str, Any]) -> dict[str, Any]:
    """containerlab's extended endpoints ``{node, interface, mac, ipv4, ipv6, vars}`` as ``NODE:IF``
    strings, their ``mac``/``ipv4``/``ipv6`` as the link's lists (one entry per endpoint)."""
    out: dict[str, Any] = {
        "endpoints": [
            f"{ep.get('node')}:{ep.get('interface')}"
            if isinstance(ep, dict) and set(ep) <= {"node", "interface", *_ENDPOINT_KEYS, "vars"}
            else ep
            for ep in endpoints
        ]
    }
    for theirs, ours in _ENDPOINT_KEYS.items():
        values = [ep.get(theirs) if isinstance(ep, dict) else None for ep in endpoints]
        if any(values) and link.get(ours) is None:
            out[ours] = values
    return out
