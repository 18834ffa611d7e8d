"""nestlab's commands run for an account: an ordinary user's as that user (its uid, gid and groups, its HOME: the
command then works in the user's own namespaces, docs/rootless.md), an administrator's as root.  Nothing the server
does for a user runs with more rights than the user has."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from dataclasses import dataclass
from typing import Any

from .accounts import Account
from .errors import ApiError

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXISTS = 3  # the exit code of nestlab.cli.steps' "absent" step for a lab that exists
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class RunAs:
    """Whose rights a command runs with: ``uid`` 0 for root, else an account's uid, gid, groups and home."""

    name: str
    uid: int
    gid: int
    gids: tuple[int, ...]
    home: str

    @classmethod
    def user(cls, account: Account) -> RunAs:
        return cls(account.name, account.uid, account.gid, tuple(account.gids), account.home)

    @classmethod
    def root(cls) -> RunAs:
        return cls("root", 0, 0, (0,), "/root")

    @property
    def is_root(self) -> bool:
        return self.uid == 0


@dataclass(frozen=True)
class Done:
    """A finished command: its exit code and output (text)."""

    code: int
    stdout: str
    stderr: str

    @property
    def reason(self) -> str:
        """What the command said went wrong: its error lines, without colours."""
        text = _ANSI.sub("", self.stderr or self.stdout).strip()
        lines = [line for line in text.splitlines() if line.startswith(("error", "Error"))] or text.splitlines()[-3:]
        return "\n".join(lines) or f"exit code {self.code}"


def environment(who: RunAs) -> dict[str, str]:
    """The command's environment: the account's own names and a plain PATH; of the server's, only PYTHONPATH (where
    nestlab itself is) and the locale."""
    env = {"HOME": who.home, "USER": who.name, "LOGNAME": who.name, "PATH": PATH, "LANG": "C.UTF-8", "TERM": "xterm-256color"}
    env["SHELL"] = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"  # a terminal's shell
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def credentials(who: RunAs) -> dict[str, Any]:
    """subprocess's arguments that make the child the account (setgroups, setgid, setuid in the child), or none for root."""
    if who.is_root:
        return {}
    return {"user": who.uid, "group": who.gid, "extra_groups": list(who.gids)}


async def spawn(who: RunAs, argv: list[str], **io: Any) -> asyncio.subprocess.Process:
    """``argv`` started as ``who`` in its home folder, in a session of its own (``io``: its standard files)."""
    program, *args = argv
    options = {**credentials(who), **io, "env": environment(who), "cwd": who.home if os.path.isdir(who.home) else "/"}
    return await asyncio.create_subprocess_exec(program, *args, start_new_session=True, **options)


OUTPUT_LIMIT = 16 << 20  # bytes of each of a command's outputs the server keeps: past it, the command is killed
ENDING = 5.0  # seconds an ended command's outputs are drained and its exit waited for


async def run(who: RunAs, argv: list[str], stdin: bytes | None = None, timeout: float = 300, limit: int = OUTPUT_LIMIT) -> Done:
    """Run ``argv`` as ``who``; its result, or 504 after ``timeout`` seconds, or 502 once either of its outputs
    passes ``limit`` bytes (the command killed then: what it prints is the user's to choose)."""
    proc = await spawn(
        who,
        argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )

    async def finished() -> tuple[tuple[bytes, bool], tuple[bytes, bool]]:
        out, err, _ = await asyncio.gather(_kept(proc, proc.stdout, limit), _kept(proc, proc.stderr, limit), _fed(proc, stdin))
        await proc.wait()
        return out, err

    what = " ".join(argv[3:5])
    try:
        (out, too_much), (err, too_much_err) = await asyncio.wait_for(finished(), timeout)
    except (TimeoutError, asyncio.CancelledError):
        await end(proc)
        raise ApiError(504, f"'{what}' did not finish within {timeout:.0f} s (stopped)") from None
    if too_much or too_much_err:
        raise ApiError(502, f"'{what}' printed more than {limit >> 20} MiB (stopped)")
    return Done(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))


async def _kept(proc: asyncio.subprocess.Process, stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, bool]:
    """What ``stream`` says, to its end; past ``limit`` bytes ``proc``'s session is killed and the rest read away."""
    kept = bytearray()
    while stream is not None and (chunk := await stream.read(1 << 16)):
        if len(kept) <= limit:
            kept += chunk
            if len(kept) > limit:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
    return bytes(kept[:limit]), len(kept) > limit


async def _fed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
    """``data`` written to the command's standard input, then closed (a command that stops reading loses the rest)."""
    if data is None or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()


async def end(proc: asyncio.subprocess.Process, how: int = signal.SIGKILL) -> None:
    """``proc``'s whole session ended (``how``: the signal, then SIGKILL if that was not enough), its outputs read
    away and its exit waited for, at most ENDING seconds each: asyncio sees a command's exit only once its pipes
    are read to their end, and a command that printed past a reader's limit would otherwise be waited for ever."""
    for signum in dict.fromkeys((how, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_drained(proc), ENDING)
            return


async def _drained(proc: asyncio.subprocess.Process) -> None:
    for stream in (proc.stdout, proc.stderr):
        while stream is not None and await stream.read(1 << 16):
            pass
    await proc.wait()


class Nestlab:
    """nestlab's command line, run by ``python`` (the server's own interpreter unless told otherwise)."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    def argv(self, *args: str) -> list[str]:
        return [self.python, "-m", "nestlab.cli.app", *args]

    async def __call__(self, who: RunAs, *args: str, stdin: bytes | None = None, timeout: float = 300) -> Done:
        return await run(who, self.argv(*args), stdin, timeout)

    async def steps(self, who: RunAs, *steps: list[str], timeout: float = 300) -> list[Done]:
        """Command lines run in one process of ``who``'s, in order until one fails (``nestlab.cli.steps``: one
        interpreter's start, one entry into the user's namespaces); each one's result, a failure to start as the
        last."""
        done = await run(who, [self.python, "-m", "nestlab.cli.steps"], json.dumps(steps).encode(), timeout)
        try:
            found = [Done(s["code"], s["stdout"], s["stderr"]) for s in json.loads(done.stdout)]
        except ValueError:
            found = []
        return found if found and not done.code else [*found, Done(done.code or 1, "", done.stderr)]

    async def inside(self, who: RunAs, *args: str, timeout: float = 60) -> Done:
        """One of :mod:`nestlab.serve.inside`'s verbs, run as ``who`` in its namespaces."""
        return await run(who, [self.python, "-m", "nestlab.serve.inside", *args], None, timeout)
