"""SSH servers (docs/servers.md): the lab placed, split into shares, each share deployed by the server's
own nestlab over SSH, all or nothing.

The lab's record holds the servers, the folder their keys are relative to and where each node went
(written before any server is touched, so a cleanup from here always knows where to go); each
server keeps its share as an ordinary lab of the same name, marked as usual, so ``nestlab cleanup``
there works on its own.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

from .. import names
from ..backends.kernel import files
from ..backends.remote.ssh import CONTROL_DIR, Remote, each
from ..engine import state, where
from ..engine.handout import handed_out
from ..errors import LabError
from ..registry import SITES
from .elsewhere import Elsewhere
from .seam import Deployed
from .shares import cause, holder, merged, place_and_partition, running

if TYPE_CHECKING:
    from .. import plugins
    from ..model.schema.machines import ServerSpec
    from ..plan.blueprint import Blueprint
    from ..plan.partition import Share
    from ..plugins import ExecReport, Progress
    from . import seam
    from .seam import Report


def remotes(servers: dict[str, Any], base: str) -> dict[str, Remote]:
    """A connection per server (``servers``: name -> ServerSpec, or its data with defaults left out); relative
    keys from ``base``."""
    from ..model.schema.machines import ServerSpec

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

    def __init__(self, servers: dict[str, ServerSpec], base: str):
        self.servers = {name: spec.model_dump() for name, spec in servers.items()}  # as the lab's record holds them
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


class Servers(Elsewhere):
    name = "ssh"
    summary = "SSH servers: a share per server, deployed by its own nestlab (servers:)"
    keys = {"servers": dict, "base": str, "placement": dict}
    rank = 20

    @classmethod
    def claims(cls, blueprint: Blueprint, options: object) -> bool:
        """A lab with servers (``servers:``, the file's or an inventory's)."""
        return bool(blueprint.topology.servers)

    def check(self, blueprint: Blueprint, machine: bool = True) -> Blueprint:
        blueprint = handed_out(blueprint)  # planned here, to be placed
        place_and_partition(blueprint)  # placement and pins: what a deploy checks before it sends a server anything
        return blueprint

    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Deploy every share at once; if any server fails, clean every server and name the one that failed.
        Each server's nestlab starts first: its start-up and the SSH handshake overlap placing and splitting."""
        blueprint = handed_out(blueprint)  # planned here, to be placed (each server plans its share again, with its own)

        base = os.path.dirname(os.path.abspath(blueprint.source)) if os.path.exists(blueprint.source) else os.getcwd()
        starting = Starting(blueprint.topology.servers, base)
        servers, conns, procs = starting.servers, starting.conns, starting.procs
        try:
            partition = place_and_partition(blueprint)
        except BaseException:
            starting.abandon()
            raise
        with state.locked(blueprint.name):
            self.data = {"servers": servers, "base": base, "placement": partition.placement.server_of}
            where.write(blueprint.name, self.name, self.data)
            if progress:
                progress("servers", 0, len(conns))
            answers = each(conns.values(), lambda r: _send_share(procs[r.name], partition.shares[r.name]))
            failed = {name: why for name, answer in answers.items() if (why := cause(answer))}
            if failed:
                each(conns.values(), lambda r: _clean(r, blueprint.name))
                files.remove_tree(names.lab_dir(blueprint.name))
                first = sorted(failed)[0]
                more = f" (and {', '.join(sorted(failed)[1:])})" if len(failed) > 1 else ""
                raise LabError(f"server {first}{more}: {failed[first]}; every server was cleaned up, nothing is left")
            running(blueprint)
        if progress:
            progress("servers", len(conns), len(conns))
        return Deployed(partition=partition, blueprint=blueprint)

    def remove(self, folder_too: bool = False) -> int:
        """Clean the lab's share on every server it was sent to, then what is left of it here; a server out of
        reach is an error naming it (the record stays, so a later ``nestlab cleanup LAB`` tries again)."""
        conns = self._conns()
        answers = each(conns.values(), lambda r: _clean(r, self.lab))
        failed = {name: why for name, answer in answers.items() if (why := cause(answer))}
        for remote in conns.values():
            remote.close()
        try:
            os.rmdir(CONTROL_DIR)  # once no master connection is left
        except OSError:
            pass
        if failed:
            raise LabError(
                "; ".join(f"server {name}: {why}" for name, why in sorted(failed.items()))
                + f"; run `nestlab cleanup {self.lab}` again once it is reachable, or `nestlab cleanup {self.lab}` on it"
            )
        return super().remove(folder_too)

    def where(self) -> str:
        return f"servers {', '.join(sorted(self.data['servers']))}"

    def shares(self) -> dict[str, plugins.Remote]:
        return dict(self._conns())

    def _conns(self) -> dict[str, Remote]:
        return remotes(self.data["servers"], self.data["base"])

    def remote(self, ref: str) -> Remote:
        server = holder(self.data["placement"], self.lab, ref)
        return remotes({server: self.data["servers"][server]}, self.data["base"])[server]

    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report:
        """Every server's ``inspect`` of its share, merged, each node with its server."""
        args = ["inspect", "--lab", self.lab, "--format", "json"]
        answers = each(self._conns().values(), lambda r: r.run(r.nestlab_cmd(*args), timeout=120))
        placement = self.data["placement"]
        return merged(
            self.lab, answers, {s: s for s in answers}, lambda _s, node: {"server": placement.get(node.split("/", 1)[0])}, only
        )


def _send_share(proc: subprocess.Popen[str], share: Share) -> subprocess.CompletedProcess[str]:
    import yaml

    text = yaml.dump(share.topology, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    out, err = proc.communicate(text, timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _clean(remote: Remote, lab: str) -> subprocess.CompletedProcess[str]:
    return remote.run(remote.nestlab_cmd("cleanup", lab), timeout=300)


SITES.register(Servers)
if TYPE_CHECKING:  # mypy holds the site to the seam

    def _is_a_site(site: Servers) -> seam.Site:
        return site
