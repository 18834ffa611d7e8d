"""A node's terminal over a WebSocket: ``nestlab shell`` on a pseudo-terminal, run as the lab's owner, its bytes
both ways (a text message ``{"resize": [COLS, ROWS]}`` resizes it).  A lab not the caller's is refused before the
handshake completes, with the reason (404)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import signal
import struct
import termios
from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from .context import Context
from .errors import ApiError
from .lab_routes import container_of, lab_param, short_name
from .labs import Target
from .runner import end, spawn


def controlling() -> None:
    """Make the pseudo-terminal (standard input) the new session's controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def terminal(ctx: Context, ws: WebSocket) -> None:
    try:
        account, lab = ctx.caller(ws), lab_param(ws)
        target = await ctx.labs.one(account, lab)
        node = short_name(target, container_of(target, ws.path_params["node"]))
    except ApiError as exc:
        await ws.send_denial_response(JSONResponse({"error": exc.reason}, status_code=exc.status))
        return
    await on_pty(ctx, ws, target, node, _pump_out, _pump_in)


QUEUED = 16  # reads of the terminal (64 KiB each) waiting for a slow client before the terminal is read no more


class Outflow:
    """The terminal's output on its way to the client: at most QUEUED reads wait; past that the terminal is not
    read (its writer blocks, as on a slow line) until the client takes one."""

    def __init__(self, leader: int) -> None:
        self.leader, self.loop = leader, asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUED)
        self.loop.add_reader(leader, self._readable)

    def _readable(self) -> None:
        try:
            self.queue.put_nowait(os.read(self.leader, 65536))
        except OSError:
            self.queue.put_nowait(b"")  # the terminal ended
        if self.queue.full():
            self.loop.remove_reader(self.leader)

    async def get(self) -> bytes:
        """The next read of the terminal; empty once it ended."""
        full = self.queue.full()
        chunk = await self.queue.get()
        if full and chunk:
            self.loop.add_reader(self.leader, self._readable)
        return chunk

    def close(self) -> None:
        self.loop.remove_reader(self.leader)


Out = Callable[[WebSocket, Outflow, asyncio.subprocess.Process], Awaitable[None]]
In = Callable[[WebSocket, int], Awaitable[None]]


async def on_pty(ctx: Context, ws: WebSocket, target: Target, node: str, out: Out, into: In, hello: str = "") -> None:
    """``nestlab shell`` on ``node`` of ``target`` on a pseudo-terminal, run as the lab's owner, joined to ``ws``
    (accepted here, ``hello`` its first text) by ``out`` (the terminal's output, an empty read at its end) and
    ``into`` (the client's messages to the terminal's side ``leader``) until either ends; then the shell is hung up."""
    leader, follower = pty.openpty()
    proc = await spawn(
        target.owner,
        ctx.nestlab.argv("shell", "--lab", target.lab, node),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        preexec_fn=controlling,  # after setsid and the account's ids: job control and ^C work in the shell
    )
    os.close(follower)
    await ws.accept()
    if hello:
        await ws.send_text(hello)
    output = Outflow(leader)
    tasks = [asyncio.ensure_future(out(ws, output, proc)), asyncio.ensure_future(into(ws, leader))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    except WebSocketDisconnect:
        pass
    finally:
        for task in tasks:
            task.cancel()
        output.close()
        os.close(leader)
        await end(proc, signal.SIGHUP)
        try:
            await ws.close()
        except RuntimeError:
            pass  # already closed by the client


async def _pump_out(ws: WebSocket, output: Outflow, proc: asyncio.subprocess.Process) -> None:
    """The terminal's output to the client, until the terminal ends (an empty read)."""
    while chunk := await output.get():
        await ws.send_bytes(chunk)


async def _pump_in(ws: WebSocket, leader: int) -> None:
    """The client's keys to the terminal, and its resizes, until the client goes."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("bytes") or (message.get("text") or "").encode()
        if data.startswith(b'{"resize"'):
            cols, rows = json.loads(data)["resize"]
            fcntl.ioctl(leader, termios.TIOCSWINSZ, struct.pack("HHHH", int(rows), int(cols), 0, 0))
            continue
        os.write(leader, data)
