"""Start N traffic pairs at the same instant and collect what each printed.

Servers start first and get a moment to listen.  Each client is a shell that blocks reading
its stdin, stamps the time (bash's ``$EPOCHREALTIME`` where the node has bash, so the stamp
costs no fork; ``date`` otherwise) and ``exec``s the tool; once every client exists, one byte is
written to each stdin in a tight loop, so all tools start within a millisecond or so of each
other however long the forks took.  The tools run in sessions of their own, so a Ctrl-C reaches
only nestlab, which then kills and reaps every one of them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field

from ..lab.node import Node

_GATE_BASH = ["bash", "-c", 'read _gate; t=$EPOCHREALTIME; echo "${t/[.,]/}000" >&2; exec "$@"', "bash"]
_GATE_SH = ["sh", "-c", 'read _gate; date +%s%N >&2; exec "$@"', "sh"]


def _gate(node: Node) -> list[str]:
    """The barrier shell for a node: bash's builtin clock if the node runs on the host's files."""
    return _GATE_BASH if node.obj.runtime == "namespace" and shutil.which("bash") else _GATE_SH


@dataclass
class Pair:
    client: Node
    command: list[str]
    server: Node | None = None
    server_command: list[str] | None = None


@dataclass
class Ran:
    command: list[str]
    started_ns: int
    returncode: int
    stdout: str
    stderr: str = field(repr=False)


def run_together(pairs: list[Pair], timeout: float, listen_wait: float = 0.3) -> list[Ran]:
    """Run every pair's client at once (servers first); returns each client's output, in order."""
    servers: list[subprocess.Popen] = []
    clients: list[subprocess.Popen] = []
    try:
        for pair in pairs:
            if pair.server and pair.server_command:
                servers.append(
                    pair.server.popen(
                        pair.server_command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
                    )
                )
        if servers:
            time.sleep(listen_wait)
        for pair in pairs:
            clients.append(
                pair.client.popen(
                    [*_gate(pair.client), *pair.command],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        for proc in clients:  # the barrier: release them all (communicate() closes stdin later)
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        deadline = time.monotonic() + timeout
        for pair, proc in zip(pairs, clients):
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            first, _, rest = err.partition("\n")
            results.append(Ran(pair.command, int(first) if first.strip().isdigit() else 0, proc.returncode, out, rest))
        return results
    finally:
        for proc in clients + servers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
