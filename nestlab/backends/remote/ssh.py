"""Commands on other machines over OpenSSH, one multiplexed connection per server (ControlMaster).

The system ``ssh`` is used rather than a Python SSH library: it reads the user's own keys, agent,
``~/.ssh/config`` and known hosts, and its master connection makes every later command on that
server cost one round trip instead of a handshake.  No agent or daemon of nestlab's runs there.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

CONTROL_DIR = "/run/nestlab-ssh"  # master sockets (short paths: a socket path has at most 107 bytes)
T = TypeVar("T")


class Remote:
    """One server: ``address``, ``user``, ``port``, ``key``, ``ssh_options`` as in a ServerSpec."""

    def __init__(
        self,
        name: str,
        address: str,
        user: str = "root",
        port: int = 22,
        key: str | None = None,
        ssh_options: Sequence[str] = (),
        nestlab: str = "nestlab",
    ):
        self.name = name
        self.nestlab = shlex.split(nestlab)
        os.makedirs(CONTROL_DIR, mode=0o700, exist_ok=True)
        self.args = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={CONTROL_DIR}/%C",
            "-o",
            "ControlPersist=60",
            "-p",
            str(port),
            *(["-i", key] if key else []),
            *(a for opt in ssh_options for a in ("-o", opt)),
            f"{user}@{address}",
        ]

    def run(
        self, args: Sequence[str], stdin: str | None = None, timeout: float = 600, tty: bool = False
    ) -> subprocess.CompletedProcess[Any]:
        """Run ``args`` there (quoted for its shell); output captured unless ``tty``."""
        command = [*self.args[:-1], *(["-t"] if tty else []), self.args[-1], "--", shlex.join(args)]
        if tty:
            return subprocess.run(command)
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)

    def popen(self, args: Sequence[str], tty: bool = False, stream: bool = False, **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``args`` there; the local ssh process stands for it (its exit code is the command's).  A
        ``stream`` this side may cut gets a connection of its own: through the shared master, the master
        would hold this side's pipes until the command ended there."""
        own = ["-o", "ControlPath=none"] if stream else []
        return subprocess.Popen(
            [*self.args[:-1], *own, *(["-t"] if tty else []), self.args[-1], "--", shlex.join(args)], **kwargs
        )

    def nestlab_cmd(self, *args: str) -> list[str]:
        """The server's nestlab command line with ``args``."""
        return [*self.nestlab, *args]

    def close(self) -> None:
        """End the master connection (later commands open a new one)."""
        subprocess.run([*self.args[:-1], "-O", "exit", self.args[-1]], capture_output=True, timeout=10)


def each(remotes: Iterable[Remote], work: Callable[[Remote], T]) -> dict[str, T | BaseException]:
    """``work`` on every server at once; per server its result or the exception it raised."""
    remotes = list(remotes)
    if not remotes:
        return {}

    def guarded(remote: Remote) -> T | BaseException:
        try:
            return work(remote)
        except Exception as exc:  # noqa: BLE001 - reported per server by the caller
            return exc

    with ThreadPoolExecutor(len(remotes)) as pool:
        return dict(zip((r.name for r in remotes), pool.map(guarded, remotes)))
