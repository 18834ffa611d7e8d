"""nestlab's commands run for an account: an ordinary user's as that user (its uid, gid and groups, its HOME: the
command then works in the user's own namespaces, docs/rootless.md), an administrator's as root.  Nothing the server
does for a user runs with more rights than the user has."""

from __future__ import annotations

import asyncio
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


async def run(who: RunAs, argv: list[str], stdin: bytes | None = None, timeout: float = 300) -> Done:
    """Run ``argv`` as ``who``; its result, or 504 (the command killed) after ``timeout`` seconds."""
    proc = await spawn(
        who,
        argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except (TimeoutError, asyncio.CancelledError):
        await end(proc)
        raise ApiError(504, f"'{' '.join(argv[3:5])}' did not finish within {timeout:.0f} s (stopped)") from None
    return Done(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))


async def end(proc: asyncio.subprocess.Process, how: int = signal.SIGKILL) -> None:
    """``proc``'s whole session ended (``how``: the signal), and waited for."""
    try:
        os.killpg(proc.pid, how)
    except ProcessLookupError:
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
