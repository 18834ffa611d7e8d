"""Kathará labs: a folder with ``lab.conf`` turned into a topology (positions point into lab.conf).

* ``dev[N]=DOMAIN`` (or ``"DOMAIN/MAC"``): the device's ``ethN`` is on collision domain DOMAIN. A domain
  of two interfaces is a veth pair; a larger one a bridge node ``cd-DOMAIN``;
* ``dev[image]``: an image naming ``frr`` makes a ``kind: frr`` router; any other runs on this
  machine's tools (a note says so for images whose software Debian lacks, e.g. quagga, p4, pox);
* ``dev[mem]``/``dev[memory]``, ``dev[cpus]``: cgroup limits; ``dev[sysctl]``, ``dev[env]``: as named;
  ``dev[bridged]``, ``dev[port]``, ``dev[num_terms]``, ``dev[shell]``, ``dev[ipv6]``: notes;
* ``dev.startup`` (after ``shared.startup``) becomes the device's ``exec``; lines that start a
  service (``systemctl start X``, ``service X start``, ``/etc/init.d/X start``) are skipped with a
  note, since a node shares this machine's init (a router's FRR is started by nestlab itself);
* every file under ``dev/`` is bound at the same path in the device's own view (its ``etc/frr/frr.conf``
  becomes the router's startup-config) where that path exists on this machine;
* ``lab.dep`` (``dev: other ...``): the device configures after the others (stages wait-for).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path as FsPath
from typing import Any

from ..errors import Path, Problem, TopologyError
from ..yamlsource import Located, read_owned_source, read_source

_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\[([A-Za-z0-9_]+)\]\s*=\s*(.*?)\s*$")
_META = re.compile(r"^\s*LAB_[A-Z_]+\s*=")
_SERVICE = re.compile(r"^\s*(systemctl\s+(re)?start\s+\S+|service\s+\S+\s+(re)?start|/etc/init\.d/\S+\s+(re)?start)\s*(&\s*)?$")
_NOTED = {
    "bridged": "devices are not connected to this machine's network",
    "port": "nodes are not reachable from outside the lab",
    "num_terms": "open a shell with `nestlab shell`",
    "shell": "`nestlab shell` opens the machine's shell",
    "ipv6": "IPv6 follows the machine's defaults",
}
_FOREIGN = ("quagga", "p4", "pox", "sdn", "bind", "wireshark")
# Web servers a start-up may start, run in the foreground as the device's cmd (in a root of its own, where the
# server writes its run and log files): service -> (program, command).
_SERVERS = {
    "apache2": ("apache2ctl", "mkdir -p /run/lock && apache2ctl -D FOREGROUND"),  # the node's /run is its own
    "nginx": ("nginx", "nginx -g 'daemon off;'"),
    "lighttpd": ("lighttpd", "lighttpd -D -f /etc/lighttpd/lighttpd.conf"),
}
_SERVICE_NAME = re.compile(r"(?:systemctl\s+(?:re)?start\s+|service\s+|/etc/init\.d/)([A-Za-z0-9_.@-]+)")


def is_lab(path: str | os.PathLike[str]) -> bool:
    p = FsPath(path)
    return p.name == "lab.conf" or (p.is_dir() and (p / "lab.conf").is_file())


def lab_name(folder: FsPath) -> str:
    """The lab's name from its folder (a folder named lab takes its parent's name too)."""
    parts = [folder.name] if folder.name != "lab" else [folder.parent.name, folder.name]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts)).strip("-_") or "kathara"
    return name[-40:].lstrip("-_")


def load(path: str | os.PathLike[str]) -> tuple[Located, str, list[Problem], int | None]:
    """``(located topology data, lab.conf path, notices, the uid owning lab.conf)`` for a Kathará lab folder or its
    lab.conf."""
    conf = FsPath(path)
    conf = conf / "lab.conf" if conf.is_dir() else conf
    folder = conf.parent.resolve()
    source = str(conf)
    text, author = read_owned_source(conf, "the lab")
    located = Located(None)
    shared = _startup(folder / "shared.startup")
    devices, ports = _read_conf(text, source, located)
    nodes, notes = _nodes(devices, located, folder, shared)
    links = _links(ports, nodes, located, source)
    for dev, waits in _deps(conf.parent / "lab.dep", devices).items():
        nodes[dev]["stages"] = {"configure": {"wait-for": [{"node": w, "stage": "configure"} for w in waits]}}
    located.data = {"name": lab_name(folder), "ipv4_pool": None, "topology": {"nodes": nodes, "links": links}}
    return located, source, [Problem((dev,), message, line, 1) for line, dev, message in sorted(notes)], author


def _at(located: Located, path: Path, line: int) -> None:
    located.positions.setdefault(path, (line, 1))


def _read_conf(
    text: str, source: str, located: Located
) -> tuple[dict[str, dict[str, Any]], dict[str, list[tuple[str, str, int]]]]:
    """lab.conf's devices (their settings) and collision domains (``domain -> [(device, interface, line)]``);
    TopologyError naming every line that is not an assignment."""
    problems: list[Problem] = []
    devices: dict[str, dict[str, Any]] = {}
    ports: dict[str, list[tuple[str, str, int]]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line or _META.match(line):
            continue
        match = _ASSIGN.match(line)
        if not match:
            problems.append(
                Problem(
                    (), f'\'{raw.strip()}\' is not a Kathará assignment such as r1[0]="A" or r1[image]="kathara/frr"', number, 1
                )
            )
            continue
        dev, key, value = match.group(1), match.group(2), match.group(3).strip("\"'")
        spec = devices.setdefault(dev, {})
        node = ("topology", "nodes", dev)
        _at(located, node, number)
        if not key.isdigit():
            _setting(spec, located, dev, key, value, number)
            continue
        domain = value.split("/", 1)[0]
        if not re.match(r"^[A-Za-z0-9_-]+$", domain):
            problems.append(Problem(node, f"collision domain '{domain}' may use only letters, digits, '-' and '_'", number, 1))
            continue
        ports.setdefault(domain, []).append((dev, f"eth{key}", number))
    if problems:
        raise TopologyError(source, problems)
    return devices, ports


def _setting(spec: dict[str, Any], located: Located, dev: str, key: str, value: str, number: int) -> None:
    """``dev[key]=value`` (any key but an interface's number) into the device's spec, or a note that it is ignored."""
    node = ("topology", "nodes", dev)
    if key == "image":
        spec["image"] = value
    elif key in ("mem", "memory"):
        spec.setdefault("resources", {})["memory"] = value
        _at(located, node + ("resources", "memory"), number)
    elif key == "cpus":
        spec.setdefault("resources", {})["cpus"] = float(value) if _number(value) else value
        _at(located, node + ("resources", "cpus"), number)
    elif key == "sysctl":
        name, _, setting = value.partition("=")
        spec.setdefault("sysctls", {})[name.strip()] = setting.strip()
        _at(located, node + ("sysctls",), number)
    elif key == "env":
        name, _, setting = value.partition("=")
        spec.setdefault("env", {})[name.strip()] = setting.strip()
        _at(located, node + ("env", name.strip()), number)
    elif key in _NOTED:
        spec.setdefault("_notes", []).append((number, dev, f"ignored: [{key}]: {_NOTED[key]}"))
    else:
        spec.setdefault("_notes", []).append((number, dev, f"ignored: [{key}] is not an option nestlab knows"))


def _nodes(
    devices: dict[str, dict[str, Any]], located: Located, folder: FsPath, shared: str
) -> tuple[dict[str, dict[str, Any]], list[tuple[int, str, str]]]:
    """The devices as nodes (kind from the image, exec from the start-up files, binds from their folders), and the notes
    ``(line, device, message)`` on what they ignore."""
    notes: list[tuple[int, str, str]] = []
    nodes: dict[str, dict[str, Any]] = {}
    for dev, spec in devices.items():
        notes += spec.pop("_notes", [])
        line = located.positions[("topology", "nodes", dev)][0]
        image = spec.pop("image", "kathara/base")
        if "frr" in image:
            spec["kind"] = "frr"
        elif any(word in image for word in _FOREIGN):
            notes.append(
                (
                    line,
                    dev,
                    f"ignored: [image]={image}: the device runs on this machine's tools, which may lack that image's software",
                )
            )
        script, skipped = _filter(shared + _startup(folder / f"{dev}.startup"))
        notes += _services(dev, spec, skipped, line)
        if script.strip():
            spec["exec"] = [script]
        spec["binds"] = _tree(folder / dev)
        spec["sysctls"] = {"net.ipv4.ip_forward": "1", **spec.get("sysctls", {})}  # as Kathará's devices have it
        nodes[dev] = spec
    return nodes, notes


def _services(dev: str, spec: dict[str, Any], skipped: list[str], line: int) -> list[tuple[int, str, str]]:
    """The notes on the start-up lines that start a service: the first web server this machine has becomes the
    device's cmd (in a root of its own), the others are ignored."""
    notes = []
    for cmd in skipped:
        server = _server(cmd) if spec.get("kind") != "frr" else None
        if server and "cmd" not in spec:
            spec["cmd"], spec["own_root"] = server, True
            notes.append(
                (line, dev, f"{dev}.startup: `{cmd}` runs `{server}` as the device's main process, in a root of its own")
            )
            continue
        why = "nestlab starts the router" if spec.get("kind") == "frr" else "it would start a service of this machine"
        notes.append((line, dev, f"ignored: {dev}.startup: `{cmd}`: {why}"))
    return notes


def _links(
    ports: dict[str, list[tuple[str, str, int]]], nodes: dict[str, dict[str, Any]], located: Located, source: str
) -> list[dict[str, Any]]:
    """The collision domains as links: a veth pair for two ports, else a bridge node ``cd-DOMAIN`` (added to ``nodes``)
    with a link from each port."""
    links: list[dict[str, Any]] = []
    for domain, members in ports.items():
        _at(located, ("topology", "links", len(links)), members[0][2])
        if len(members) == 2:
            links.append({"endpoints": [f"{d}:{i}" for d, i, _ in members]})
            continue
        switch = f"cd-{domain}"
        if switch in nodes:
            raise TopologyError(
                source,
                [
                    Problem(
                        ("topology", "nodes", switch),
                        f"device '{switch}' has the name nestlab gives collision domain {domain}'s bridge; rename it",
                        members[0][2],
                        1,
                    )
                ],
            )
        nodes[switch] = {"kind": "bridge"}
        _at(located, ("topology", "nodes", switch), members[0][2])
        for j, (dev, iface, line) in enumerate(members):
            _at(located, ("topology", "links", len(links)), line)
            port = f"{dev}-{iface}" if len(dev) + len(iface) < 15 else f"p{j}"
            links.append({"endpoints": [f"{dev}:{iface}", f"{switch}:{port}"]})
    return links


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _startup(path: FsPath) -> str:
    return read_source(path, "the start-up file") + "\n" if path.is_file() else ""


def _filter(script: str) -> tuple[str, list[str]]:
    kept, skipped = [], []
    for line in script.splitlines():
        if _SERVICE.match(line):
            skipped.append(line.strip())
            kept.append(": " + line.strip())  # a no-op keeps line numbers and any if/fi around it intact
        else:
            kept.append(line)
    return "\n".join(kept).strip() + "\n" if any(k.strip() for k in kept) else "", skipped


def _server(line: str) -> str | None:
    """The foreground command of the web server a start-up line starts, if this machine has it."""
    found = _SERVICE_NAME.search(line)
    program, command = _SERVERS.get(found.group(1).removesuffix(".service") if found else "", ("", ""))
    return command if program and shutil.which(program) else None


def _tree(root: FsPath) -> list[str]:
    """Binds of every file under a device's folder onto the same path (a path this machine lacks gives
    the device a root of its own, backends/views.py)."""
    if not root.is_dir():
        return []
    return [
        f"{file.resolve()}:/{file.relative_to(root).as_posix()}" for file in sorted(p for p in root.rglob("*") if p.is_file())
    ]


def _deps(path: FsPath, devices: dict[str, Any]) -> dict[str, list[str]]:
    """``lab.dep``'s ``dev: other ...`` lines; a name that is no device of lab.conf is refused at its line."""
    if not path.is_file():
        return {}
    deps, problems = {}, []
    for number, line in enumerate(read_source(path, "lab.dep").splitlines(), 1):
        dev, sep, others = line.split("#", 1)[0].partition(":")
        if not sep or not dev.strip():
            if line.split("#", 1)[0].strip():
                problems.append(Problem((), f"'{line.strip()}' is not a dependency such as r1: r2 r3", number, 1))
            continue
        for name, column in [
            (dev.strip(), line.index(dev.strip()) + 1),
            *((w, line.index(w, len(dev) + 1) + 1) for w in others.split()),
        ]:
            if name not in devices:
                problems.append(
                    Problem(
                        (),
                        f"'{name}' is not a device of lab.conf ({', '.join(sorted(devices)[:8])}{', ...' if len(devices) > 8 else ''})",
                        number,
                        column,
                    )
                )
        deps[dev.strip()] = others.split()
    if problems:
        raise TopologyError(str(path), problems)
    return deps
