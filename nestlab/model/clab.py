"""containerlab's spellings rewritten into nestlab's before the schema sees them.

* ``${VAR}``, ``${VAR:=default}``, ``${VAR:-default}`` in the file text come from the environment;
  a Go template (``{{ .var }}``) is rendered first (model/gotemplate.py, with its vars file);
* node ``cpu``/``memory``/``cpu-set`` become ``resources``; an empty node (``n1:``) is ``{}``;
* special endpoints: ``host:IF`` (a veth to this machine, mode: host), ``mgmt-net:IF`` (a port of
  the lab's management bridge, a ``kind: bridge`` node named mgmt-net), ``macvlan:PARENT``
  (mode: macvlan on a real interface, which still needs ``allow_host_interfaces: true``);
* the extended link form (``type: veth|host|mgmt-net|macvlan|vxlan|dummy`` with ``endpoint(s)``; an
  endpoint's ``mac`` goes to the link's ``macs``; ``type: vxlan`` is mode vxlan-remote).
"""

from __future__ import annotations

import os
import re

from .errors import Problem
from .yamlsource import Located

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}")
MGMT = "mgmt-net"
_RESOURCES = {"cpu": "cpus", "memory": "memory", "cpu-set": "cpuset"}
_SPECIAL = ("host", MGMT, "macvlan")


def expand_env(text: str) -> str:
    """containerlab's environment substitution: ``${VAR}``, ``${VAR:-default}``, ``${VAR:=default}``."""

    def sub(match: re.Match) -> str:
        name, op, default = match.groups()
        value = os.environ.get(name)
        if op and (value is None or (op.startswith(":") and value == "")):
            return default
        return value or ""

    return _ENV.sub(sub, text)


def template_line(text: str) -> int | None:
    """The first line holding a Go template action, if any."""
    for number, line in enumerate(text.splitlines(), 1):
        if "{{" in line and "}}" in line and not line.lstrip().startswith("#"):
            return number
    return None


def normalize(data: dict, located: Located, notices: list[Problem]) -> tuple[dict, list[Problem]]:
    """Rewrite containerlab forms in ``data`` (a topology file's top level); returns it and any problems."""
    body = data.get("topology")
    if not isinstance(body, dict):
        return data, []
    body = dict(body)
    problems: list[Problem] = []
    if isinstance(body.get("nodes"), dict):
        body["nodes"] = {name: {} if spec is None else spec for name, spec in body["nodes"].items()}
        for name in body["nodes"]:
            if isinstance(name, str) and "|" in name:
                problems.append(located.problem(("topology", "nodes", name), f"'{name}' is containerlab's bridge-inside-a-node form, which nestlab does not build; "
                                                "make the bridge a node of its own (kind: bridge) linked to the node", key=True))
    for section in ("nodes", "kinds", "groups"):
        if isinstance(body.get(section), dict):
            body[section] = {name: _resources(spec) for name, spec in body[section].items()}
    if isinstance(body.get("defaults"), dict):
        body["defaults"] = _resources(body["defaults"])
    if isinstance(body.get("links"), list):
        links = []
        defined = set(body.get("nodes") or {}) if isinstance(body.get("nodes"), dict) else set()
        for i, link in enumerate(body["links"]):
            if isinstance(link, dict):
                link = _link(link, ("topology", "links", i), located, notices, problems, defined)
            if isinstance(link, dict) and link.pop("_real_parent", False) and data.get("allow_host_interfaces") is not True:
                problems.append(located.problem(("topology", "links", i, "endpoints"), f"macvlan:{link['parent']} hangs the node on this machine's interface "
                                                f"{link['parent']}: add allow_host_interfaces: true to say so (its traffic then leaves the machine there)"))
            if link is not None:
                links.append(link)
        body["links"] = links
        uses_mgmt = any(isinstance(ep, str) and ep.startswith(MGMT + ":") for ln in links if isinstance(ln, dict)
                        for ep in ln.get("endpoints") or [])
        if uses_mgmt and isinstance(body.get("nodes"), dict) and MGMT not in body["nodes"]:
            body["nodes"] = {**body["nodes"], MGMT: {"kind": "bridge"}}
    return {**data, "topology": body}, problems


def _resources(spec):
    if not isinstance(spec, dict) or not any(key in spec for key in _RESOURCES):
        return spec
    spec = dict(spec)
    resources = dict(spec.get("resources") or {})
    for key, ours in _RESOURCES.items():
        if key in spec:
            resources.setdefault(ours, spec.pop(key))
    spec["resources"] = resources
    return spec


def _link(link: dict, path, located: Located, notices: list[Problem], problems: list[Problem], defined: set[str]) -> dict | None:
    """One link in nestlab's form (None: dropped with a notice)."""
    kind = link.get("type")
    if kind is not None:
        link = {k: v for k, v in link.items() if k != "type"}
        if kind == "dummy":
            notices.append(located.problem(path + ("type",), "ignored: a dummy interface has nothing on its other side; add the address to a real link", key=True))
            return None
        if kind in _SPECIAL:
            endpoint = link.pop("endpoint", None) or {}
            ours = f"{endpoint.get('node')}:{endpoint.get('interface')}" if isinstance(endpoint, dict) else str(endpoint)
            other = link.pop("host-interface", None)
            if kind == "macvlan":
                if "mode" in link:
                    link["macvlan_mode"] = link.pop("mode")
            link["endpoints"] = [ours, f"{kind}:{other}"]
        elif kind in ("vxlan", "vxlan-stitch"):  # one node's end tunnelled to another machine
            endpoint = link.pop("endpoint", None) or {}
            link["endpoints"] = [f"{endpoint.get('node')}:{endpoint.get('interface')}" if isinstance(endpoint, dict) else str(endpoint)]
            link["mode"] = "vxlan-remote"
            if "udp-port" in link:
                link["port"] = link.pop("udp-port")
        elif kind != "veth":
            problems.append(located.problem(path + ("type",), f"type: {kind} links are not supported; nestlab links nodes with veth (and host:, mgmt-net:, macvlan: endpoints, "
                                                              "and type: vxlan to another machine)"))
            return None
    endpoints = link.get("endpoints")
    if not isinstance(endpoints, list):
        return link
    macs = [ep.get("mac") if isinstance(ep, dict) else None for ep in endpoints]
    if any(macs):
        link = {**link, "macs": macs}
    special = [j for j, ep in enumerate(endpoints) if isinstance(ep, str) and ep.partition(":")[0] in ("host", "macvlan") and ep.partition(":")[0] not in defined]
    if len(endpoints) != 2 or len(special) != 1:
        return link
    j = special[0]
    kind, _, name = endpoints[j].partition(":")
    kept = {k: v for k, v in link.items() if k not in ("ipv4", "ipv6", "macs")}
    kept["endpoints"] = [endpoints[1 - j]]
    for family in ("ipv4", "ipv6"):
        if isinstance(link.get(family), list) and len(link[family]) == 2:
            kept[family] = [link[family][1 - j]]
    if kind == "host":
        return {**kept, "mode": "host", "host_interface": name}
    return {**kept, "mode": "macvlan", "parent": name, "_real_parent": True}
