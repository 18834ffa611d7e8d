"""Take freshly deployed nodes through their stages (nestlab/model/stages.py): a thread per node waits
for the stages it names in ``wait-for``, runs its stage ``exec`` on entering and leaving, starts its
``cmd`` and runs its ``exec`` in configure, and polls its healthcheck.  Nodes without any of that
simply run their ``exec`` in turn, as before stages existed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Protocol

from .. import names
from ..backends.kernel import detached, files, procs
from ..errors import LabError
from ..model.schema.nodes import STAGES, Healthcheck
from ..model.stages import Startup, startup_of
from . import nodes

if TYPE_CHECKING:
    from ..model.schema import Topology
    from ..model.schema.nodes import StageSpec
    from ..plugins import ExecReport

TIMEOUT = 600.0  # the longest a node waits for another's stage
HEAD, TAIL, WIDE = 10, 20, 500  # an exec's output as reported: its first and last lines, each cut at WIDE characters


class Staged(nodes.LabView, Protocol):
    """What a node's start-up needs of its lab: a :class:`~nestlab.plan.blueprint.Blueprint`, or the Python API's ``Lab``."""

    @property
    def topology(self) -> Topology: ...


def run(staged: Staged, added: list[str], on_exec: ExecReport | None) -> None:
    """Run the start-up of the nodes ``added`` by a deploy (exec results go to ``on_exec``)."""
    nodes = staged.topology.topology.nodes
    startups = {name: startup_of(staged.topology, name) if name in nodes else Startup() for name in added}
    if all(s.plain for s in startups.values()):
        for name in added:
            run_exec(staged, name, on_exec)
        return
    _Stages(staged, startups, on_exec).run()


def run_exec(staged: Staged, name: str, on_exec: ExecReport | None) -> None:
    """Run the node's ``exec`` commands in turn."""
    for command in staged.plan.nodes[name].exec:
        _report(on_exec, name, command, *_run_in(staged, name, command))


def _run_in(staged: Staged, name: str, command: str) -> tuple[int, str]:
    proc = nodes.popen(
        staged.name,
        staged.plan,
        name,
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


def _report(on_exec: ExecReport | None, name: str, command: str, code: int, out: str) -> None:
    if on_exec:
        on_exec(name, command, code, trimmed(out))


def trimmed(output: str) -> str:
    """An exec's output (stdout and stderr as they came) short enough to read: its first HEAD and last TAIL
    lines (a failure's cause is usually at the end), the lines between counted, each line cut at WIDE."""
    lines = [
        line if len(line) <= WIDE else line[:WIDE] + f" ... ({len(line) - WIDE} more characters)" for line in output.splitlines()
    ]
    if len(lines) > HEAD + TAIL + 1:
        lines = [*lines[:HEAD], f"... ({len(lines) - HEAD - TAIL} lines not shown)", *lines[-TAIL:]]
    return "\n".join(lines) + ("\n" if lines else "")


def start_cmd(staged: Staged, name: str, cmd: str) -> subprocess.Popen[bytes]:
    """The node's main process, in a session of its own, its output in the node's folder (cmd.log), its pid
    and start time in cmd.pid (for :func:`restart_cmd`)."""
    folder = names.node_dir(staged.name, name)
    files.make_dirs(folder, 0o700)
    log = os.open(os.path.join(folder, "cmd.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        proc = nodes.popen(staged.name, staged.plan, name, ["sh", "-c", cmd], **detached.options(log))
    finally:
        os.close(log)
    files.write(os.path.join(folder, "cmd.pid"), f"{proc.pid} {procs.start_time(proc.pid)}\n", sync=False)
    return proc


def restart_cmd(staged: Staged, name: str, grace: float = 5.0) -> int:
    """Stop the node's ``cmd`` (its whole session: SIGTERM, SIGKILL after ``grace`` seconds) if it still runs,
    and start it again; returns the new pid."""
    if name not in staged.plan.nodes:
        raise LabError(f"lab {staged.name} has no node '{name}'")
    cmd = startup_of(staged.topology, name).cmd if name in staged.topology.topology.nodes else None
    if not cmd:
        raise LabError(f"node {name} has no cmd: (containerlab's main process) to restart; give it one in the topology")
    pid = _running_cmd(staged.name, name)
    if pid is not None:
        _stop_session(pid, grace)
    return start_cmd(staged, name, cmd).pid


def _running_cmd(lab: str, name: str) -> int | None:
    """The pid of the node's cmd while that very process (same start time: pids are reused) is alive."""
    try:
        with open(os.path.join(names.node_dir(lab, name), "cmd.pid")) as fh:
            pid, started = (int(x) for x in fh.read().split())
    except (FileNotFoundError, ValueError):
        return None
    return pid if procs.start_time(pid) == started else None


def _stop_session(pid: int, grace: float) -> None:
    """SIGTERM to the session's process group, then SIGKILL to whatever of it is left once the leader has
    ended or ``grace`` has passed."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while procs.start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Stages:
    def __init__(self, staged: Staged, startups: dict[str, Startup], on_exec: ExecReport | None):
        self.lab = staged
        self.startups = startups
        self.on_exec = on_exec
        self.done = {(n, s): threading.Event() for n in startups for s in STAGES}
        self.cmds: dict[str, subprocess.Popen[bytes]] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + TIMEOUT
        # Stage exit waits for cmd to end only where another node waits for that.
        self.exit_waited = {
            w.node for s in startups.values() for spec in s.stages.values() for w in spec.wait_for if w.stage == "exit"
        }

    def run(self) -> None:
        threads = [threading.Thread(target=self._guarded, args=(name,), name=f"stages-{name}") for name in self.startups]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.errors:
            raise LabError(
                f"lab {self.lab.name} is deployed, but its start-up failed: "
                + "; ".join(self.errors)
                + f" (see the nodes' output, then `nestlab destroy --lab {self.lab.name}`)"
            )

    def _guarded(self, name: str) -> None:
        try:
            self._node(name)
        except Exception as exc:  # noqa: BLE001 - any failure of one node is reported, and releases the others
            with self.lock:
                self.errors.append(f"{name}: {exc}")
            for event in self.done.values():
                event.set()

    def _node(self, name: str) -> None:
        startup = self.startups[name]
        time.sleep(startup.delay)
        for stage in STAGES:
            spec = startup.stages.get(stage)
            for wait in spec.wait_for if spec else []:
                event = self.done.get((wait.node, wait.stage))
                if event is None:
                    continue  # a node that was already running: its stages are long past
                if not event.wait(max(0.0, self.deadline - time.monotonic())):
                    raise LabError(f"waited {TIMEOUT:.0f} s for {wait.node} to finish its {wait.stage} stage")
                if self.errors:
                    return
            self._execs(name, spec, "on-enter")
            if stage == "configure":
                if startup.cmd:
                    self.cmds[name] = start_cmd(self.lab, name, startup.cmd)
                for command in self.lab.plan.nodes[name].exec:
                    self._say(name, command, *_run_in(self.lab, name, command))
            elif stage == "healthy" and startup.health and startup.health.test[0] != "NONE":
                self._healthy(name, startup.health)
            elif stage == "exit" and name in self.exit_waited and name in self.cmds:
                self.cmds[name].wait(timeout=max(0.0, self.deadline - time.monotonic()))
            self._execs(name, spec, "on-exit")
            self.done[(name, stage)].set()

    def _execs(self, name: str, spec: StageSpec | None, phase: str) -> None:
        for step in spec.exec if spec else []:
            if step.phase != phase:
                continue
            if step.target == "host":
                proc = subprocess.run(["sh", "-c", step.command], capture_output=True, text=True, timeout=300)
                self._say(f"{name} (on the host)", step.command, proc.returncode, proc.stdout + proc.stderr)
            else:
                self._say(name, step.command, *_run_in(self.lab, name, step.command))

    def _healthy(self, name: str, check: Healthcheck) -> None:
        time.sleep(check.start_period)
        args = ["sh", "-c", check.test[1]] if check.test[0] == "CMD-SHELL" else check.test[1:]
        out = ""
        for attempt in range(check.retries):
            if attempt:
                time.sleep(check.interval)
            proc = nodes.popen(
                self.lab.name,
                self.lab.plan,
                name,
                args,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            try:
                out, _ = proc.communicate(timeout=check.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out = proc.communicate()[0] + f"(timed out after {check.timeout:g} s)"
                continue
            if proc.returncode == 0:
                return
        raise LabError(
            f"not healthy: {' '.join(check.test[1:])!r} failed {check.retries} times (last output: {out.strip()[-200:]!r})"
        )

    def _say(self, name: str, command: str, code: int, out: str) -> None:
        with self.lock:
            _report(self.on_exec, name, command, code, out)
