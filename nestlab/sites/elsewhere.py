"""A lab run elsewhere, by running the same command in its shares: what the SSH and Kubernetes sites have in
common as a site (``nestlab.sites.seam.Site``); how they place and split a lab is in shares.py.

Such a site is made for one lab from its record (``engine/where.py``) or, for a deploy, empty; a command on
the lab runs the same ``nestlab`` command in the share holding its nodes (:meth:`Elsewhere.forward`), and
each node's share answers for it (:meth:`Elsewhere.remote`).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, ClassVar

from ..backends.kernel import files
from ..engine.handout import handed_out
from ..errors import LabError
from ..plan.diff import diff, steps
from ..plan.objects import Plan
from .interleave import interleave
from .seam import Done, Site

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Step
    from ..plugins import ExecReport, Progress, Remote
    from .seam import Deployed, Report, Say, Value


class Elsewhere(Site):
    """A lab on servers or pods, each share deployed by the nestlab there.  Subclasses set the class attributes
    and implement the hooks."""

    name: ClassVar[str] = ""  # the record's word
    summary: ClassVar[str] = ""  # one line for `nestlab modes` and docs/architecture.md
    keys: ClassVar[dict[str, type]] = {}  # what the record must hold, and of which type
    rank: ClassVar[int] = 50  # where ``sites.chosen`` asks it, among the sites (lowest first)

    def __init__(self, lab: str, data: dict[str, Any], options: object = None):
        """The site of ``lab``: from its record (``data``), or empty for a deploy, made with the ``options`` a
        deploy chose it with (:meth:`claims`)."""
        self.lab = lab
        self.data = data

    @classmethod
    def claims(cls, blueprint: Blueprint, options: object) -> bool:
        """Whether a new deploy of ``blueprint`` (with ``options``, what a command chose it with) goes here."""
        raise NotImplementedError

    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Make the lab ``blueprint`` describes here (what runs already and is still wanted stays); ``progress``
        hears of each phase, ``on_exec`` of each ``exec:`` command a node ran."""
        raise NotImplementedError

    def check(self, blueprint: Blueprint, machine: bool = True) -> Blueprint:
        """Every check a deploy of ``blueprint`` here makes before it changes anything (``nestlab validate``);
        ``machine``: also whether this machine has what the lab needs (else only the file is checked).  Returns
        the blueprint as checked (handed out to this machine, planned)."""
        blueprint = handed_out(blueprint)
        blueprint.plan
        return blueprint

    def preview(self, blueprint: Blueprint) -> list[Step]:
        """What a deploy of ``blueprint`` would change, object by object (``deploy --dry-run``): against the
        plan recorded when it was deployed."""
        from ..engine import state

        blueprint = handed_out(blueprint)
        current = state.read(blueprint.name)
        have = current.plan if current else Plan()
        return steps(diff(blueprint.plan, have), have)

    def remove(self, folder_too: bool = False) -> int:
        """Remove everything of the lab: at this site, then what is marked as its on this machine; returns how many
        namespaces went here.  ``folder_too``: also the lab directory beside its file (clab-LAB/)."""
        from ..engine import cleanup

        return cleanup.remove_here(self.lab, folder_too)

    def where(self) -> str:
        """Where the lab runs, for a person: "servers s1, s2", ..."""
        raise NotImplementedError

    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report:
        """The lab as it runs: each node (``only``: just those) with its interfaces and where it runs."""
        raise NotImplementedError

    def remote(self, ref: str) -> Remote | None:
        """Where ``ref`` (NODE, NODE/COMPONENT or NODE:IF) runs."""
        raise NotImplementedError

    def shares(self) -> dict[str, Remote]:
        """Every share of the lab, by name."""
        raise NotImplementedError

    def popen(self, plan: Plan, node: str, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``args`` inside ``node``: the share holding it runs ``nestlab exec`` there."""
        remote = self.remote(node)
        if remote is None:
            raise LabError(f"node {node} of lab {self.lab} runs in none of its shares")
        return remote.popen(remote.nestlab_cmd("exec", "--lab", self.lab, node, "--", *args), **kwargs)

    def holders(self, refs: list[str]) -> dict[str, list[str]]:
        """The shares holding ``refs``, each with its refs in the order given."""
        by_share: dict[str, list[str]] = {}
        for ref in refs:
            remote = self.remote(ref)
            by_share.setdefault(remote.name if remote else "", []).append(ref)
        return by_share

    def forward(
        self,
        commands: dict[str, list[str]],
        out: IO[bytes],
        count: int | None = None,
        by_line: bool = True,
        duration: float | None = None,
    ) -> int:
        """Run ``nestlab ARGS`` in several shares (``commands``: share -> ARGS), their output merged into
        ``out`` as it comes, whole lines at a time (at most ``count``, for at most ``duration`` seconds),
        or as it arrives with ``by_line`` false (binary output of one share); returns the worst exit code
        (0 when this side ended them)."""
        shares = self.shares()
        procs = [
            shares[share].popen(shares[share].nestlab_cmd(*args), stream=True, stdout=subprocess.PIPE)
            for share, args in commands.items()
        ]
        return interleave(procs, out, count, by_line, duration)

    def removal(self, count: int) -> str:
        """What a person reads once the lab is removed (``count``: namespaces removed on this machine)."""
        return f"lab {self.lab}: removed from {self.where()}"

    def states(self, blueprint: Blueprint) -> dict[str, str]:
        """Each node's state where it runs (running, stopped); a node whose namespace is gone is left out."""
        return {str(n["name"]): str(n["state"]) for n in self.inspect(blueprint)["nodes"]}

    def capture(
        self,
        ends: list[tuple[str, str]],
        into: str,
        bpf: str | None,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done:
        """Capture on ``ends`` (NODE, INTERFACE) into the pcapng file ``into`` ("-": standard output), filtered by
        ``bpf``, for at most ``count`` packets or ``duration`` seconds: by the share holding them, relayed here."""

        refs = [f"{node}:{iface}" for node, iface in ends]
        share = self.one_share(refs, "capture each share's in a command of its own")
        args = [
            "capture",
            "--lab",
            self.lab,
            *refs,
            "-w",
            "-",
            *(["-f", bpf] if bpf else []),
            *(["-c", str(count)] if count else []),
            *(["-d", str(duration)] if duration is not None else []),
        ]
        with files.created(into) if into != "-" else contextlib.nullcontext(sys.stdout.buffer) as fh:
            return Done(self.forward({share: args}, fh, by_line=False))

    def events(
        self,
        out: IO[bytes],
        fmt: str,
        since: str | None,
        follow: bool,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done:
        """What happens in the lab, a line each in ``fmt`` (text, json), from ``since`` ago (0: the whole log) and
        then as it comes (``follow``), at most ``count`` or for ``duration`` seconds: every share's, merged."""
        args = [
            "events",
            "--lab",
            self.lab,
            "--format",
            fmt,
            *(["--since", since] if since is not None else []),
            "--follow" if follow else "--no-follow",
            *(["-d", str(duration)] if duration is not None else []),
            *(["-c", str(count)] if count is not None else []),
        ]
        return Done(self.forward({share: args for share in self.shares()}, out, count, duration=duration))

    def link_set(self, blueprint: Blueprint, a: str, b: str, params: dict[str, Value], direction: str, out: IO[bytes]) -> Done:
        """Change the link between ``a`` and ``b`` in place (``params``: ``link set``'s options, ``state``: up or down;
        ``direction``: both, a or b): by the share holding it, whose own line says what it did."""
        from ..engine.link_changes import find

        find(blueprint, a, b)  # the lab has the link (else: which links it has)
        if params.get("trace"):
            raise LabError("--trace on a lab on servers: the trace file would have to be on the server; not supported yet")
        share = self.one_share(
            [a, b],
            "live changes to a link cut between servers (a VXLAN tunnel) are not supported yet; pin both ends to one server",
        )
        options = [x for k, v in params.items() if k != "state" for x in (f"--{k}", str(v))]
        flags = [f"--{params['state']}"] if "state" in params else []
        command = ["link", "set", "--lab", self.lab, a, b, *options, *flags, "--direction", direction]
        return Done(self.forward({share: command}, out))

    def power(
        self,
        blueprint: Blueprint,
        action: str,
        refs: list[str],
        exec_too: bool,
        out: IO[bytes],
        on_exec: ExecReport | None,
    ) -> Done:
        """Stop, start or restart the nodes ``refs`` (``exec_too``: run their ``exec:`` again): by each share holding
        some of them, whose own lines say what they did."""
        extra = ["--exec"] if exec_too else []
        commands = {share: ["node", action, "--lab", self.lab, *held, *extra] for share, held in self.holders(refs).items()}
        return Done(self.forward(commands, out))

    def one_share(self, refs: list[str], what: str) -> str:
        """The one share holding every one of ``refs``; refused when they are spread over several."""
        by_share = self.holders(refs)
        if len(by_share) > 1:
            raise LabError(f"{', '.join(refs)} are on {', '.join(sorted(by_share))}: {what}")
        return next(iter(by_share))
