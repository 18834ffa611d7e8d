"""The caller's labs' events over a WebSocket: ``nestlab clab events --format json`` (containerlab's events, one
JSON object a message) run as the caller, so a user hears only of their own labs (an administrator: root's)."""

from __future__ import annotations

import asyncio

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from .context import Context
from .errors import ApiError
from .runner import RunAs, end, spawn


async def events(ctx: Context, ws: WebSocket) -> None:
    try:
        account = ctx.caller(ws)
    except ApiError as exc:
        await ws.send_denial_response(JSONResponse({"error": exc.reason}, status_code=exc.status))
        return
    who = RunAs.root() if account.admin else RunAs.user(account)
    argv = ctx.nestlab.argv(
        "clab", "events", "--format", "json", *(["--initial-state"] if ws.query_params.get("initial") else [])
    )
    proc = await spawn(
        who, argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    await ws.accept()

    async def pump_out() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            await ws.send_text(line.decode(errors="replace").rstrip("\n"))

    async def until_closed() -> None:
        while (await ws.receive())["type"] != "websocket.disconnect":
            pass

    tasks = [asyncio.ensure_future(pump_out()), asyncio.ensure_future(until_closed())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await end(proc)
        try:
            await ws.close()
        except RuntimeError:
            pass  # already closed by the client
