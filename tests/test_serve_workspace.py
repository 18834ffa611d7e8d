"""The web app's workspace routes keep to the caller's ~/.clab, its netem form's empty fields ask for nothing, and
what a user's command or terminal prints is held only up to a bound (pure checks, no server: the routes themselves
run in tests/test_serve_webapp.py)."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import time

import pytest

from nestlab.serve import runner, terminal, workspace
from nestlab.serve.errors import ApiError
from nestlab.serve.runner import RunAs
from nestlab.serve.session_routes import _given

ALICE = RunAs("alice", 1500, 1500, (1500,), "/home/alice")


def test_a_workspace_path_stays_in_the_workspace():
    assert workspace.inside(ALICE, "web1/web1.clab.yml") == "/home/alice/.clab/web1/web1.clab.yml"
    assert workspace.lab_file(ALICE, "web1", "web1.clab.yml") == "/home/alice/.clab/web1/web1.clab.yml"
    for hostile in ("../.ssh/id_rsa", "web1/../../x", "/etc/shadow", "a\x00b"):
        with pytest.raises(ApiError) as refused:
            workspace.inside(ALICE, hostile)
        assert refused.value.status == 400 and "without '..'" in refused.value.reason


def test_the_apps_empty_netem_fields_ask_for_nothing():
    form = {"containerName": "clab-web1-a", "interface": "eth1", "delay": "0ms", "jitter": "0ms", "loss": 0, "rate": 2000}
    assert _given(form) == {"containerName": "clab-web1-a", "interface": "eth1", "loss": 0, "rate": 2000}
    assert _given({"delay": "50ms", "jitter": "bad"}) == {"delay": "50ms", "jitter": "bad"}  # left for the check to refuse


def test_a_command_printing_without_end_is_killed_at_the_bound_and_nothing_waits_for_ever():
    """A user's file may be a link to /dev/zero (the workspace reads it with ``cat`` as the user): the server keeps
    at most the bound of it, kills the command (502), and a command still printing at its timeout is killed and
    waited for within ENDING (504); before, the reader kept 400 MB/s until the timeout and then waited for ever."""

    async def case(argv: list[str], timeout: float, limit: int) -> tuple[int, float]:
        started = time.monotonic()
        with pytest.raises(ApiError) as stopped:
            await runner.run(RunAs.root(), argv, timeout=timeout, limit=limit)
        return stopped.value.status, time.monotonic() - started

    status, took = asyncio.run(case(["cat", "/dev/zero"], 30, 1 << 20))
    assert status == 502 and took < 10, (status, took)
    slow = ["sh", "-c", "while :; do head -c 2000000 /dev/zero; sleep 0.2; done"]
    status, took = asyncio.run(case(slow, 1.5, 1 << 30))
    assert status == 504 and took < 1.5 + 2 * runner.ENDING, (status, took)


def test_a_terminal_a_client_does_not_read_is_read_no_more():
    """A shell printing without end to a client that reads nothing: the server holds at most QUEUED reads of it,
    then stops reading the terminal (its writer blocks) until the client takes one."""

    async def case() -> tuple[int, int]:
        leader, follower = pty.openpty()
        writer = subprocess.Popen(["cat", "/dev/zero"], stdout=follower, stderr=subprocess.DEVNULL)
        os.close(follower)
        try:
            flow = terminal.Outflow(leader)
            await asyncio.sleep(1.0)
            held = flow.queue.qsize()
            assert await flow.get()
            await asyncio.sleep(0.5)
            flow.close()
            return held, flow.queue.qsize()
        finally:
            writer.kill()
            writer.wait()
            os.close(leader)

    held, after = asyncio.run(case())
    assert held == terminal.QUEUED and after == terminal.QUEUED, (held, after)
