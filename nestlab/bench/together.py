"""Start N traffic pairs at the same instant and collect what each printed.

Servers start first, and the clients wait until each server's node has a new listening socket
(a TCP socket in LISTEN, or a bound UDP socket: iperf3 and sockperf servers make one), however long
a loaded machine takes to start them.  Each client is a shell that blocks reading
its stdin, stamps the time (bash's ``$EPOCHREALTIME`` where the node has bash, so the stamp
costs no fork; ``date`` otherwise) and ``exec``s the tool; once every client exists, one byte is
written to each stdin in a tight loop, so all tools start within a millisecond or so of each
other however long the forks took.  The tools run in sessions of their own, so a Ctrl-C reaches
only nestlab, which then kills and reaps every one of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

from .. import names
from ..backends.kernel import namespaces, sockets
from ..lab.node import Node

_GATE_BASH = ["bash", "-c", 'read _gate; t=$EPOCHREALTIME; echo "${t/[.,]/}000" >&2; exec "$@"', "bash"]
_GATE_SH = ["sh", "-c", 'read _gate; date +%s%N >&2; exec "$@"', "sh"]


def _gate(node: Node) -> list[str]:
    """The barrier shell for a node: bash's builtin clock if the node runs on the host's files."""
    return _GATE_BASH if node.obj.runtime == "namespace" and shutil.which("bash") else _GATE_SH


def _sockets(node: Node) -> int | None:
    """How many TCP sockets listen and UDP sockets are bound in the node's network namespace; ``None``
    when the node's namespace is not on this machine (a node on another server or in Kubernetes)."""
    path = names.netns_path(node.lab.name, node.name)
    if not os.path.exists(path):
        return None
    with namespaces.entered(path):
        return sockets.serving()


def _wait_listening(started: list[tuple[Node, subprocess.Popen[str]]], before: dict[str, int | None], timeout: float) -> None:
    """Until each server node has a socket more for each server started in it (or the server
    exited, or ``timeout`` passed); a fixed 0.3 s where a node's sockets cannot be read from here."""
    expected = Counter(node.name for node, _ in started)
    nodes = {node.name: node for node, _ in started}
    if any(before[name] is None for name in expected):
        time.sleep(0.3)
        return
    deadline = time.monotonic() + timeout
    waiting = set(expected)
    while waiting and time.monotonic() < deadline:
        exited = {node.name for node, proc in started if proc.poll() is not None}
        waiting = {n for n in waiting if n not in exited and (_sockets(nodes[n]) or 0) < (before[n] or 0) + expected[n]}
        if waiting:
            time.sleep(0.01)


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


def run_together(pairs: list[Pair], timeout: float, listen_timeout: float = 10.0) -> list[Ran]:
    """Run every pair's client at once, once the servers listen; returns each client's output, in order."""
    started: list[tuple[Node, subprocess.Popen[str]]] = []
    clients: list[subprocess.Popen[str]] = []
    try:
        served = [(pair.server, pair.server_command) for pair in pairs if pair.server and pair.server_command]
        nodes = {node.name: node for node, _ in served}
        before = {name: _sockets(node) for name, node in nodes.items()}
        for node, command in served:
            proc = node.popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            started.append((node, proc))
        _wait_listening(started, before, listen_timeout)
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
            stdin = proc.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write("go\n")
            stdin.flush()
        results = []
        deadline = time.monotonic() + timeout
        for pair, proc in zip(pairs, clients):
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            first, _, rest = err.partition("\n")
            results.append(Ran(pair.command, int(first) if first.strip().isdigit() else 0, proc.returncode, out, rest))
        return results
    finally:
        for proc in clients + [proc for _, proc in started]:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
