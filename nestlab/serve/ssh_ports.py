"""The server's SSH ports (docs/serve.md): each a session of one caller to one node, listening until its time is up,
each connection relayed to the node's SSH port by ``nestlab ssh --stdio`` run as the lab's owner (so it reaches
only the owner's namespaces, docs/rootless.md); the node's own sshd then asks for the login."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from .accounts import Account
from .errors import ApiError
from .runner import Nestlab, RunAs, end, spawn

PORTS = range(2223, 2323)  # clab-api-server's SSH_BASE_PORT to SSH_MAX_PORT
LONGEST = timedelta(hours=24)
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def duration(text: str) -> timedelta:
    """A Go duration of hours, minutes and seconds ("1h", "30m", "1h30m"), 1 s to 24 h; 400 otherwise."""
    found = _DURATION.fullmatch(text)
    if not text or not found:
        raise ApiError(400, f"Invalid duration {text[:40]!r}: hours, minutes and seconds, e.g. 1h, 30m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    wanted = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if not timedelta(seconds=1) <= wanted <= LONGEST:
        raise ApiError(400, f"Invalid duration {text!r}: from 1s to 24h")
    return wanted


@dataclass
class Session:
    """One open port: whose (the caller who asked, the lab's owner the relay runs as), to which node, until when."""

    port: int
    caller: str
    owner: RunAs
    lab: str
    node: str
    container: str
    username: str
    created: datetime
    expiration: datetime
    server: asyncio.Server | None = None
    relays: set[asyncio.subprocess.Process] = field(default_factory=set)

    def info(self) -> dict[str, object]:
        return {
            "port": self.port,
            "labName": self.lab,
            "nodeName": self.container,
            "username": self.username,
            "created": self.created.isoformat(),
            "expiration": self.expiration.isoformat(),
        }


class Sessions:
    """The server's open SSH ports, each closed when its time is up."""

    def __init__(self, host: str, nestlab: Nestlab) -> None:
        self.host = host
        self.nestlab = nestlab
        self.open: dict[int, Session] = {}

    async def start(self, session: Session) -> None:
        """Listen on the first free port of :data:`PORTS` for ``session``; 503 when none is free."""
        for port in PORTS:
            if port in self.open:
                continue
            try:
                session.server = await asyncio.start_server(
                    lambda r, w: self._relay(session, r, w), self.host, port, reuse_address=True
                )
            except OSError:
                continue
            session.port = port
            self.open[port] = session
            delay = (session.expiration - datetime.now(UTC)).total_seconds()
            asyncio.get_running_loop().call_later(delay, self._expire, session)
            return
        raise ApiError(503, f"no free SSH port on this server ({PORTS.start}-{PORTS.stop - 1}): close a session first")

    def _expire(self, session: Session) -> None:
        if self.open.get(session.port) is session:  # not a later session on the same port
            asyncio.ensure_future(self.close(session.port))

    async def close(self, port: int) -> None:
        session = self.open.pop(port, None)
        if session is None:
            return
        if session.server is not None:
            session.server.close()
        for proc in list(session.relays):
            await end(proc)

    async def _relay(self, session: Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection relayed to the node's SSH port by ``nestlab ssh --stdio``, run as the lab's owner."""
        # --stdio before NODE: what follows NODE is the command `nestlab ssh` runs there
        argv = self.nestlab.argv("ssh", "--lab", session.lab, "--stdio", session.node)
        proc = await spawn(
            session.owner, argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        session.relays.add(proc)
        assert proc.stdin is not None and proc.stdout is not None
        sink, source = proc.stdin, proc.stdout

        async def up() -> None:
            while data := await reader.read(65536):
                sink.write(data)
                await sink.drain()
            sink.close()

        async def down() -> None:
            while data := await source.read(65536):
                writer.write(data)
                await writer.drain()

        try:
            sending = asyncio.ensure_future(up())
            with contextlib.suppress(OSError, ConnectionError):
                await down()
            sending.cancel()
        finally:
            session.relays.discard(proc)
            await end(proc)
            writer.close()

    def of(self, account: Account, every: bool = False) -> list[Session]:
        return [s for s in self.open.values() if every or s.caller == account.name]
