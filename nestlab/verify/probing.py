"""What every kind of check's probe shares: a tool run in a node, what it said of a failure, and the
probe itself: a call that tries the check once and says whether it held and what it saw."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..lab.node import Node
from ..model.checks import Latency, Rate, Reach
from .targets import Target

if TYPE_CHECKING:
    from ..lab.lab import Lab

Probe = Callable[[], tuple[bool, str]]
# Each kind's maker: the lab and the check's spec in, its probe out.
ProbeMaker = Callable[[Any, Any], Probe]


def run_in(running: Lab, node: str, args: list[str], timeout: float = 10) -> tuple[int, str]:
    """``args`` run in ``node``: its exit code and what it wrote (both streams), cut off after ``timeout`` seconds."""
    proc = Node(running, node).popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0] + f"(no end after {timeout:g} s)"
    return proc.returncode, out


def said(out: str, *marks: str) -> str:
    """What a tool said of its failure, whole lines: the last line holding one of ``marks``, else its last line."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if any(m in line for m in marks)), lines[-1] if lines else "(no output)")


def target_of(running: Lab, s: Reach | Rate | Latency) -> Target:
    """The address a check between two nodes aims at, found through the lab's routes (verify/targets.py)."""
    return Target(running, s.source, s.target, lambda node, args: run_in(running, node, args))
