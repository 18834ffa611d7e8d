"""A lab split across servers (docs/servers.md): placed, split into shares, each share deployed by the
server's own nestlab over SSH, all or nothing.

This machine keeps ``/run/nestlab/LAB/servers.json`` (written before any server is touched, so a
cleanup from here always knows where to go) and the lab's state; each server keeps its share as an
ordinary lab of the same name, marked as usual, so ``nestlab cleanup`` there works on its own.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import names
from ..backends.ssh import CONTROL_DIR, Remote, each
from ..errors import LabError
from . import state

if TYPE_CHECKING:  # the schema and the splitter load only for a lab that spans servers
    from ..plan.placement import Placement
    from ..plan.split import Share

RECORD = "servers.json"


@dataclass
class Split:
    placement: Placement
    shares: dict[str, Share]
    mtu: int  # of links and ports that cross servers


def split(lab, servers: dict | None = None, underlay: dict[str, str] | None = None) -> Split:
    """Where each node goes and what each server deploys (nothing is touched): on the lab's servers:, or
    on ``servers`` (name -> ServerSpec) whose tunnel addresses are ``underlay`` (e.g. placeholders)."""
    from ..plan.placement import place
    from ..plan.split import VXLAN_HEADERS, shares

    topo = lab.topology
    servers = servers or topo.servers
    pins = {name: spec.server for name, spec in topo.topology.nodes.items() if spec.server}
    if not servers and pins:
        pin_error(
            lab,
            next(iter(pins.values())),
            "is named here, but this lab has no servers: add servers: to the file or pass "
            "--servers FILE (on Kubernetes, nestlab k8s deploy takes it as a node's name)",
        )
    if not servers:
        raise LabError("this lab names no servers: add servers: to the file or pass --servers FILE")
    for server in pins.values():
        if server not in servers:
            pin_error(lab, server, f"is not one of the servers {', '.join(sorted(servers))}")
    placed = place(lab.plan, {name: spec.weight for name, spec in servers.items()}, pins)
    if underlay is None:
        underlay = {}
        for name, spec in servers.items():
            try:
                underlay[name] = str(ipaddress.IPv4Address(spec.underlay or spec.address))
            except ValueError:
                raise LabError(
                    f"server {name}: address {spec.address} is not an IPv4 address; give underlay: IP for its VXLAN tunnels"
                ) from None
    raw = topo.model_dump(mode="json", exclude_defaults=True)  # what the file says, groups and components applied
    parts = shares(raw, lab.plan, placed, underlay, topo.stitch.port, topo.stitch.vni, topo.stitch.mtu)
    return Split(placed, parts, topo.stitch.mtu - VXLAN_HEADERS)


def pin_error(lab, server: str, message: str) -> None:
    """A ``server:`` that cannot be honoured: a file error at the first node pinned there (exit 2, file:line:col)."""
    from ..model.clab import expand_env
    from ..model.errors import Problem, TopologyError
    from ..model.yamlsource import load_yaml, read_source

    node = next(n for n, spec in lab.topology.topology.nodes.items() if spec.server == server)
    path = ("topology", "nodes", node, "server")
    try:
        problem = load_yaml(expand_env(read_source(lab.source)), lab.source).problem(path, f"server '{server}' {message}")
    except (OSError, LabError, ValueError):  # not a plain file (a Kathará folder, stdin, the Python API): no position to give
        problem = Problem(path, f"server '{server}' {message}")
    raise TopologyError(lab.source, [problem])


def remotes(servers: dict, base: str) -> dict[str, Remote]:
    """A connection per server (``servers``: name -> ServerSpec, or its data with defaults left out); relative
    keys from ``base``."""
    from ..model.schema import ServerSpec

    out = {}
    for name, spec in servers.items():
        spec = ServerSpec.model_validate(spec) if isinstance(spec, dict) else spec
        out[name] = Remote(
            name,
            spec.address,
            spec.user,
            spec.port,
            os.path.join(base, spec.key) if spec.key else None,
            spec.ssh_options,
            spec.nestlab,
        )
    return out


class Starting:
    """Each server's nestlab, started and reading its share from standard input: its start-up and the SSH
    handshake overlap with loading, placing and splitting the lab here."""

    def __init__(self, servers: dict, base: str):
        self.servers = servers
        self.conns = remotes(servers, base)
        self.procs = {
            name: r.popen(
                r.nestlab_cmd("deploy", "-t", "/dev/stdin"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, r in self.conns.items()
        }

    def abandon(self) -> None:
        """Send every server an empty share: each refuses it and makes nothing."""
        for proc in self.procs.values():
            try:
                proc.communicate("", timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()


def deploy(lab, progress=None, starting: Starting | None = None) -> Split:
    """Deploy every share at once; if any server fails, clean every server and name the one that failed.
    ``starting``: the servers' nestlab already started (for these very servers), else started here."""
    base = os.path.dirname(os.path.abspath(lab.source)) if os.path.exists(lab.source) else os.getcwd()
    servers = {name: spec.model_dump() for name, spec in lab.topology.servers.items()}
    if starting is None or starting.servers != servers:
        if starting:
            starting.abandon()
        starting = Starting(servers, base)
    conns, procs = starting.conns, starting.procs
    try:
        plan = split(lab)
    except BaseException:
        starting.abandon()
        raise
    with state.locked(lab.name):
        write_record(lab.name, {"servers": servers, "base": base, "placement": plan.placement.server_of, "status": "deploying"})
        if progress:
            progress("servers", 0, len(conns))
        answers = each(conns.values(), lambda r: _send_share(procs[r.name], plan.shares[r.name]))
        failed = {name: cause for name, answer in answers.items() if (cause := _cause(answer))}
        if failed:
            each(conns.values(), lambda r: _clean(r, lab.name))
            shutil.rmtree(names.lab_dir(lab.name), ignore_errors=True)
            first = sorted(failed)[0]
            more = f" (and {', '.join(sorted(failed)[1:])})" if len(failed) > 1 else ""
            raise LabError(f"server {first}{more}: {failed[first]}; every server was cleaned up, nothing is left")
        state.write(state.LabState(lab.name, "running", os.getpid(), lab.source, time.time(), lab._raw, lab.plan))
        write_record(lab.name, {"servers": servers, "base": base, "placement": plan.placement.server_of, "status": "running"})
    if progress:
        progress("servers", len(conns), len(conns))
    return plan


def _send_share(proc: subprocess.Popen, share: Share) -> subprocess.CompletedProcess:
    import yaml

    text = yaml.dump(share.topology, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    out, err = proc.communicate(text, timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _cause(answer) -> str | None:
    """Why a server's command failed (its last error lines), or None if it did not."""
    if isinstance(answer, BaseException):
        return f"{type(answer).__name__}: {answer}"
    if answer.returncode == 0:
        return None
    lines = [ln for ln in answer.stderr.splitlines() if ln.strip() and not ln.startswith("note ")]
    if answer.returncode == 255:
        return "SSH failed: " + (lines[-1] if lines else "no answer")
    return " / ".join(lines[-3:]) or f"exit {answer.returncode}"


def _clean(remote: Remote, lab: str):
    return remote.run(remote.nestlab_cmd("cleanup", lab), timeout=300)


class DamagedRecord(LabError):
    """servers.json cannot be read: the servers it named are unknown here."""


def record(lab: str) -> dict | None:
    """What this machine knows of a lab's servers, or None for a lab on this machine only."""
    path = os.path.join(names.lab_dir(lab), RECORD)
    try:
        with open(path, "rb") as fh:
            found = json.loads(fh.read())
        if not isinstance(found, dict) or not {"servers", "base", "placement"} <= set(found):
            raise ValueError("not a servers record")
        return found
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise DamagedRecord(
            f"{path} is damaged ({exc}): the lab's servers are unknown here; run `nestlab cleanup {lab}` on each of them"
        ) from None


def write_record(lab: str, data: dict, record: str = RECORD) -> None:
    """Write a lab's record (where its shares went) whole, or not at all."""
    os.makedirs(names.lab_dir(lab), exist_ok=True)
    tmp = os.path.join(names.lab_dir(lab), record + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, os.path.join(names.lab_dir(lab), record))


def remove_remote(lab: str) -> None:
    """Clean the lab's share on every server it was sent to; a server out of reach is an error naming it
    (the record stays, so a later ``nestlab cleanup LAB`` tries again)."""
    found = record(lab)
    if not found:
        return
    conns = remotes(found["servers"], found["base"])
    answers = each(conns.values(), lambda r: _clean(r, lab))
    failed = {name: cause for name, answer in answers.items() if (cause := _cause(answer))}
    for remote in conns.values():
        remote.close()
    try:
        os.rmdir(CONTROL_DIR)  # once no master connection is left
    except OSError:
        pass
    if failed:
        raise LabError(
            "; ".join(f"server {name}: {cause}" for name, cause in sorted(failed.items()))
            + f"; run `nestlab cleanup {lab}` again once it is reachable, or `nestlab cleanup {lab}` on it"
        )


def holder(found: dict, lab: str, ref: str) -> str:
    """The server (or share) holding ``ref`` (a node, component or NODE:IF) of a lab placed as ``found`` records."""
    held = found["placement"].get(ref.split(":", 1)[0].split("/", 1)[0])
    if held is None:
        raise LabError(f"lab {lab} has no node '{ref.split(':', 1)[0]}'")
    return held


def remote_for(lab: str, node: str) -> Remote | None:
    """The connection to the server that runs ``node`` of a split lab (None for a lab on this machine)."""
    found = record(lab)
    if not found:
        return None
    server = holder(found, lab, node)
    return remotes({server: found["servers"][server]}, found["base"])[server]


def inspect(lab: str) -> dict:
    """Every server's ``inspect`` of its share, merged, each node with its server."""
    found = record(lab) or {}
    conns = remotes(found.get("servers", {}), found.get("base", "/"))
    answers = each(conns.values(), lambda r: r.run(r.nestlab_cmd("inspect", "--lab", lab, "--format", "json"), timeout=120))
    by_name: dict[str, dict] = {}
    for server, answer in sorted(answers.items()):
        if cause := _cause(answer):
            raise LabError(f"server {server}: {cause}")
        for node in json.loads(answer.stdout)["nodes"]:
            interfaces = [{**i, "server": server} for i in node["interfaces"]]
            if node["name"] in by_name:  # a switch copied onto several servers: one node, every server's ports
                by_name[node["name"]]["interfaces"] += [i for i in interfaces if i["name"] != node["name"]]
            else:
                by_name[node["name"]] = {
                    **node,
                    "interfaces": interfaces,
                    "server": found["placement"].get(node["name"].split("/", 1)[0]),
                }
    current = state.read(lab)
    return {"lab": lab, "source": current.source if current else None, "nodes": list(by_name.values())}
