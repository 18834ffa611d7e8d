"""How people and tools reach a lab's nodes, as they reach containerlab's: names, SSH and inventories.

For a lab with a management network (docs/management.md), after its nodes are made:

* ``/run/netns/clab-LAB-NODE`` (the node's long name, after ``prefix:``): ``ip netns exec clab-LAB-NODE``;
* a block of ``/etc/hosts`` in containerlab's format, written under containerlab's own lock;
* ``/etc/ssh/ssh_config.d/clab-LAB.conf`` as containerlab writes it, with the lab's key;
* SSH on port 22 of every node's management address (engine/sshgate.py);
* the lab directory ``clab-LAB/`` beside the topology file (or under ``$CLAB_LABDIR_BASE``):
  ``topology-data.json``, ``ansible-inventory.yml``, ``nornir-simple-inventory.yml``.

What is made is recorded first (``/run/nestlab/LAB/access.json``), so destroy and a cleanup after a
killed deploy remove exactly it; the lab directory stays after destroy, as containerlab's does, and
goes with ``destroy --cleanup``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import shlex
import socket
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import names
from ..backends.kernel import files
from ..errors import LabError
from ..model.credentials import IN_QUOTES, Login, inventory_vars, kind_login, text_problem
from ..model.layered import merged
from ..plan.mgmt import interfaces
from ..registry import KINDS
from . import etc_hosts, sshgate

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.machine import Machine

SSH_CONFIG_DIR = "/etc/ssh/ssh_config.d"


@dataclass(frozen=True)
class Managed:
    """A node on the management network, as tools see it."""

    node: str
    long: str
    kind: str
    ipv4: ipaddress.IPv4Interface
    ipv6: ipaddress.IPv6Interface
    login: Login = Login()


def managed(blueprint: Blueprint) -> list[Managed]:
    """The lab's nodes with a management address, in name order (as its plan has them)."""
    found = []
    for att in sorted(interfaces(blueprint.plan).values(), key=lambda a: a.end.node):
        node = blueprint.plan.nodes[att.end.node]
        found.append(
            Managed(
                node.name,
                node.long,
                node.kind,
                ipaddress.IPv4Interface(att.end.ipv4[0]),
                ipaddress.IPv6Interface(att.end.ipv6[0]),
                node.login,
            )
        )
    return found


def lab_folder(blueprint: Blueprint) -> str:
    """``clab-LAB`` beside the topology file, or under ``$CLAB_LABDIR_BASE``, as containerlab puts it; for a
    topology read from a pipe (a server's share of a lab), in the lab's state directory, gone with the lab."""
    if os.environ.get("CLAB_LABDIR_BASE"):
        base = os.environ["CLAB_LABDIR_BASE"]
    elif os.path.isfile(blueprint.source):
        base = os.path.dirname(os.path.abspath(blueprint.source))
    else:
        base = names.lab_dir(blueprint.name) if os.path.exists(blueprint.source) else os.getcwd()
    return os.path.join(base, f"clab-{blueprint.name}")


def inventories(blueprint: Blueprint) -> list[Managed]:
    """The lab directory alone, for a lab whose nodes are on servers or pods (each of them publishes its
    own nodes' names and SSH there), recorded so ``destroy --cleanup`` removes it here."""
    nodes = managed(blueprint)
    if nodes:
        folder = lab_folder(blueprint)
        etc_hosts.record(blueprint.name, {"netns": [], "folder": folder})
        _files(blueprint, folder, nodes)
    return nodes


class Preparing:
    """What publishing needs of no kernel object, done on a thread while the nodes are made: the lab
    directory's files written and the lab's keys made (ssh-keygen runs as processes of its own)."""

    def __init__(self, blueprint: Blueprint):
        self.nodes: list[Managed] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, args=(blueprint,), name="nestlab-access")
        self.thread.start()

    def _work(self, blueprint: Blueprint) -> None:
        try:
            self.nodes = managed(blueprint)
            if self.nodes:
                _files(blueprint, lab_folder(blueprint), self.nodes)
                serves = blueprint.machine.serves_ssh  # no SSH server, no login to give a uid (rootless, one id mapped)
                sshgate.keys(blueprint.name, {n.node: n.login for n in self.nodes} if serves else {})
        except BaseException as exc:  # re-raised by done()
            self.error = exc

    def done(self) -> list[Managed]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.nodes


def publish(blueprint: Blueprint, preparing: Preparing) -> list[Managed]:
    """Make the lab's nodes reachable by name and SSH, once they exist (nothing for a lab without management)."""
    nodes = preparing.done()
    if not nodes:
        return []
    folder = lab_folder(blueprint)
    guest = blueprint.machine.guest
    config = os.path.join(ssh_config_dir(blueprint.machine), f"clab-{blueprint.name}.conf")
    key = sshgate.client_key(blueprint.name)
    record = {"netns": [n.long for n in nodes], "ssh_config": config, "folder": folder}
    if guest:  # the key where the user's own ssh reads it (the lab's keys are in the user's namespaces)
        key = record["ssh_key"] = os.path.join(blueprint.machine.home, f".ssh/nestlab/clab-{blueprint.name}.id_ed25519")
    etc_hosts.stop_gate(blueprint.name)  # a redeploy's gate holds every node's socket anew
    etc_hosts.unpin_gone(blueprint.name, set(record["netns"]))
    etc_hosts.record(blueprint.name, record)  # first: a cleanup knows what to look for
    gate = sshgate.start(blueprint, [(n.node, str(n.ipv4.ip)) for n in nodes])
    if gate.proc is not None:
        etc_hosts.record(blueprint.name, {**record, "gate": gate.proc.pid})
    for node in nodes:
        etc_hosts.alias(names.netns_path(blueprint.name, node.node), os.path.join(names.NETNS_DIR, node.long))
    etc_hosts.block(blueprint.name, _host_lines(nodes))
    files.make_dirs(os.path.dirname(config), 0o700 if guest else 0o755)
    if guest:
        with open(sshgate.client_key(blueprint.name), "rb") as src:
            files.write(key, src.read(), 0o600, create=0o700)
    _ssh_config(blueprint.name, config, nodes, key, guest)
    gate.ready()
    return nodes


def _host_lines(nodes: list[Managed]) -> list[str]:
    v4 = [f"{n.ipv4.ip}\t{n.long}\t# Kind: {n.kind}" for n in nodes]
    v6 = [f"{n.ipv6.ip}\t{n.long}\t# Kind: {n.kind}" for n in nodes]
    return v4 + v6


def ssh_config_dir(machine: Machine) -> str:
    """Where a lab's ssh config goes: the machine's folder, or rootless, the user's ``~/.ssh/config.d``."""
    return os.path.join(machine.home, ".ssh/config.d") if machine.guest else SSH_CONFIG_DIR


def _ssh_config(lab: str, path: str, nodes: list[Managed], key: str, guest: bool) -> None:
    """containerlab's ssh config: per node its user (credentials:, else root) and key (identity-file:, else the lab's).
    Rootless, a node is reached through ``nestlab ssh --stdio`` (its address is in the user's namespaces, where an
    ssh run outside does not reach)."""
    text = f"# Containerlab SSH Config for the {lab} lab\n"
    relay = shlex.join([sys.executable, "-P", "-m", "nestlab.cli.app", "ssh", "--lab", lab, "--stdio"])
    for node in nodes:
        via = f"\tProxyCommand {relay} {node.node}\n" if guest else ""
        identity = node.login.identity_file or key
        if problem := text_problem(identity, f"node {node.node}'s identity file", IN_QUOTES) or text_problem(
            node.login.user, f"node {node.node}'s user", IN_QUOTES + " \t"
        ):  # every user's ssh reads this file: a line of another's making would run as them
            raise LabError(f"{problem}: the lab's ssh config is not written")
        text += (
            f'\nHost {node.long}\n\tUser {node.login.user}\n\tIdentityFile "{identity}"\n'
            f"\tStrictHostKeyChecking=no\n\tUserKnownHostsFile=/dev/null\n{via}"
        )
    files.write(path, text, 0o600 if guest else 0o644)  # no secret: users' ssh reads it


def _files(blueprint: Blueprint, folder: str, nodes: list[Managed]) -> None:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: a 500-node inventory in 20 ms, not 300
    secret = any(n.login.password for n in nodes)
    try:  # the folder and its parents reached through no link their owner could swap in (backends/kernel/files.py)
        with files.folder(os.path.dirname(folder)) as parent:
            owner = _owner(blueprint, parent)
            where = files.open_dir(os.path.basename(folder), create=0o755 if owner else 0o700, beneath=parent)
    except OSError as exc:
        raise LabError(f"lab directory {folder}: {exc.strerror} (a symbolic link is not followed)") from None
    try:
        # one line: the C encoder (indented: 0.1 s at 500 nodes)
        _written(where, "topology-data.json", json.dumps(topology_data(blueprint, nodes)) + "\n", False, owner)
        text = yaml.dump(ansible_inventory(blueprint, nodes), Dumper=dumper, sort_keys=False)
        _written(where, "ansible-inventory.yml", text, secret, owner)
        text = yaml.dump(nornir_inventory(nodes, blueprint.machine), Dumper=dumper, sort_keys=False)
        _written(where, "nornir-simple-inventory.yml", text, secret, owner)
    finally:
        os.close(where)


def _owner(blueprint: Blueprint, parent: int) -> tuple[int, int] | None:
    """Who the lab directory's files go to: the owner of the open folder ``parent`` it is in when they also own the
    topology file (wrote the lab, and run Ansible on it) or run nestlab; None (nestlab's own user keeps them) in
    another's folder for a lab they did not write, so a folder's owner is never handed a topology's passwords."""
    found = os.fstat(parent)
    return (found.st_uid, found.st_gid) if found.st_uid in (blueprint.author, os.geteuid()) else None


def _written(folder: int, name: str, text: str, secret: bool, owner: tuple[int, int] | None) -> None:
    """``name`` in the open ``folder`` holding ``text``, owned by ``owner`` (:func:`_owner`); ``secret`` (it holds
    passwords): 0600.  That folder may be a user's: written whole by files.write_at (never through a link planted
    there)."""
    files.write_at(folder, name, text, 0o600 if secret else 0o644, owner)


def topology_data(blueprint: Blueprint, nodes: list[Managed]) -> dict[str, Any]:
    """containerlab's topology-data.json: the lab, its nodes (long name, FQDN, management addresses) and links."""
    doc = blueprint.document
    by_node = {n.node: n for n in nodes}
    folder = lab_folder(blueprint)
    out_nodes: dict[str, dict[str, Any]] = {}
    for name, obj in blueprint.plan.nodes.items():
        if KINDS.get(obj.kind).machine or obj.parent:
            continue
        node = by_node.get(name)
        spec = doc["topology"]["nodes"].get(name, {})
        out_nodes[name] = {
            "index": str(len(out_nodes)),
            "shortname": name,
            "longname": obj.long,
            "fqdn": f"{name}.{blueprint.name}.io",
            "group": str(spec.get("group") or ""),
            "labdir": os.path.join(folder, name),
            "kind": names.clab_kind(obj.kind),
            "image": str(spec.get("image") or ""),
            "mgmt-net": (doc.get("mgmt") or {}).get("network", "") if node else "",
            "mgmt-intf": "eth0" if node else "",
            "mgmt-ipv4-address": str(node.ipv4.ip) if node else "",
            "mgmt-ipv4-prefix-length": node.ipv4.network.prefixlen if node else 0,
            "mgmt-ipv6-address": str(node.ipv6.ip) if node else "",
            "mgmt-ipv6-prefix-length": node.ipv6.network.prefixlen if node else 0,
            "mac-address": "",
            "labels": {k: str(v) for k, v in merged(doc, name, obj.kind, "labels").items()},
        }
    links = [
        {
            "endpoints": {
                "a": {"node": x.a.node, "interface": x.a.iface, "mac": x.a.mac or "", "peer": "z"},
                "z": {"node": x.b.node, "interface": x.b.iface, "mac": x.b.mac or "", "peer": "a"},
            }
        }
        for x in blueprint.plan.links.values()
    ]
    return {
        "name": blueprint.name,
        "type": "clab",
        "clab": {"config": {"prefix": doc.get("prefix") if doc.get("prefix") is not None else "clab", "mgmt": doc.get("mgmt")}},
        "nodes": out_nodes,
        "links": links,
    }


def _reached_at(node: Managed, machine: Machine) -> str:
    """Where the inventories send tools: the node's address, or rootless, its name (the user's ssh config leads
    there through the user's namespaces, where the address is)."""
    return node.long if machine.guest else str(node.ipv4.ip)


def ansible_inventory(blueprint: Blueprint, nodes: list[Managed]) -> dict[str, Any]:
    """containerlab's ansible-inventory.yml: a group per kind and per ``ansible-group`` label, ``ansible_host`` set."""
    doc = blueprint.document
    by_kind: dict[str, list[Managed]] = {}
    for node in nodes:
        by_kind.setdefault(names.clab_kind(node.kind), []).append(node)
    kinds: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for kind, members in sorted(by_kind.items()):
        group_vars, host_vars = inventory_vars({n.node: n.login for n in members}, kind_login(doc, members[0].kind))
        kinds[kind] = {**({"vars": group_vars} if group_vars else {}), "hosts": {}}
        for node in members:
            host = {"ansible_host": _reached_at(node, blueprint.machine), **host_vars[node.node]}
            kinds[kind]["hosts"][node.long] = host
            group = merged(doc, node.node, node.kind, "labels").get("ansible-group")
            if group:
                groups.setdefault(str(group), {"hosts": {}})["hosts"][node.long] = host
    defaults = (doc["topology"].get("defaults") or {}).get("credentials") or {}
    top = {"ansible_httpapi_use_proxy": False}
    top |= {
        key: defaults[word]
        for key, word in (("ansible_user", "username"), ("ansible_password", "password"))
        if defaults.get(word)
    }
    return {"all": {"vars": top, "children": kinds | dict(sorted(groups.items()))}}


def nornir_inventory(nodes: list[Managed], machine: Machine) -> dict[str, dict[str, Any]]:
    """containerlab's nornir-simple-inventory.yml: each node by its short name, its management address as hostname."""
    return {
        node.node: {
            "username": node.login.user,
            "password": node.login.password,
            "platform": "linux",
            "hostname": _reached_at(node, machine),
        }
        for node in nodes
    }


def relay(address: str, port: int) -> int:
    """Carry standard input to ``address``:``port`` and what comes back to standard output until the node's side
    ends (an ssh ProxyCommand, as ``ssh -W``); 1, said on standard error, when the node does not answer."""
    try:
        conn = socket.create_connection((address, port), timeout=10)
    except OSError as exc:
        print(f"nestlab ssh --stdio: {address} port {port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    conn.settimeout(None)
    given, shown = sys.stdin.fileno(), sys.stdout.fileno()
    watched: list[int | socket.socket] = [conn, given]
    with conn:
        while True:
            for ready in select.select(watched, [], [])[0]:
                if ready is conn:
                    data = conn.recv(65536)
                    if not data:
                        return 0
                    while data:
                        data = data[os.write(shown, data) :]
                elif data := os.read(given, 65536):
                    conn.sendall(data)
                else:  # the client is done sending: the node may still answer
                    conn.shutdown(socket.SHUT_WR)
                    watched.remove(given)
