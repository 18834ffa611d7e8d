"""The apps' terminal sessions and netem tools: a session is made for a node of the caller's lab (POST), then its
stream is a WebSocket speaking JSON messages (``ready``, ``output`` in base64, ``exit`` out; ``input``, ``resize``,
``close`` in) over ``nestlab shell`` on a pseudo-terminal, run as the lab's owner.  A session is its maker's only:
anyone else gets 404.  The netem tools name a node by its container name and shape that end of its link."""

from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import os
import secrets
import struct
import termios
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket

from ..model.units import parse_time
from .context import Context
from .errors import ApiError
from .lab_routes import container_of, lab_param, short_name
from .labs import Target
from .node_routes import changes, shape, shaping
from .terminal import Outflow, on_pty

LIFETIME = 3600.0


@dataclass
class Session:
    """A terminal session: whose, on which node."""

    id: str
    username: str
    target: Target
    node: str
    created: float

    def info(self, state: str) -> dict[str, Any]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created))
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created + LIFETIME))
        return {
            "sessionId": self.id,
            "username": self.username,
            "labName": self.target.lab,
            "nodeName": self.node,
            "protocol": "shell",
            "state": state,
            "createdAt": stamp,
            "expiresAt": expires,
            "lastActivity": stamp,
        }


_SESSIONS: dict[str, Session] = {}


async def create(ctx: Context, request: Request) -> Response:
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    node = short_name(target, container_of(target, request.path_params["node"]))
    now = time.time()
    for key in [k for k, s in _SESSIONS.items() if s.created + LIFETIME < now]:
        del _SESSIONS[key]
    session = Session(secrets.token_urlsafe(16), account.name, target, node, now)
    _SESSIONS[session.id] = session
    return JSONResponse(session.info("pending"))


def _mine(ctx: Context, conn: Request | WebSocket) -> Session:
    account = ctx.caller(conn)
    session = _SESSIONS.get(conn.path_params["session"])
    if session is None or session.username != account.name or session.created + LIFETIME < time.time():
        raise ApiError(404, "Terminal session not found")
    return session


async def show(ctx: Context, request: Request) -> Response:
    return JSONResponse(_mine(ctx, request).info("pending"))


async def close(ctx: Context, request: Request) -> Response:
    del _SESSIONS[_mine(ctx, request).id]
    return JSONResponse({"message": "closed"})


async def stream(ctx: Context, ws: WebSocket) -> None:
    try:
        session = _mine(ctx, ws)
    except ApiError as exc:
        await ws.send_denial_response(JSONResponse({"error": exc.reason}, status_code=exc.status))
        return
    await on_pty(ctx, ws, session.target, session.node, _out, _in, hello=json.dumps({"type": "ready"}))


async def _out(ws: WebSocket, output: Outflow, proc: asyncio.subprocess.Process) -> None:
    while chunk := await output.get():
        await ws.send_text(json.dumps({"type": "output", "data": base64.b64encode(chunk).decode(), "encoding": "base64"}))
    await ws.send_text(json.dumps({"type": "exit", "exitCode": await proc.wait()}))


async def _in(ws: WebSocket, leader: int) -> None:
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        try:
            sent = json.loads(message.get("text") or message.get("bytes") or b"{}")
        except ValueError:
            continue
        if sent.get("type") == "input":
            os.write(leader, str(sent.get("data", "")).encode())
        elif sent.get("type") == "resize":
            size = struct.pack("HHHH", int(sent.get("rows", 24)), int(sent.get("cols", 80)), 0, 0)
            fcntl.ioctl(leader, termios.TIOCSWINSZ, size)
        elif sent.get("type") == "close":
            return


async def _container(ctx: Context, request: Request, name: str) -> tuple[Target, str]:
    """The caller's lab holding container ``name``, and the node's own name; 404 when no lab of theirs has it."""
    account = ctx.caller(request)
    for lab, containers in (await ctx.labs.listing(account)).items():
        if any(c.get("name") == name for c in containers):
            target = await ctx.labs.one(account, lab)
            return target, short_name(target, name)
    raise ApiError(404, f"Container '{name}' not found")


async def netem_show(ctx: Context, request: Request) -> Response:
    name = request.query_params.get("containerName", "")
    target, node = await _container(ctx, request, name)
    return JSONResponse({name: await shaping(ctx, target, node)})


def _zero_time(value: object) -> bool:
    try:
        return parse_time(str(value)) == 0
    except ValueError:
        return False  # left for the check of the fields to refuse, naming it


def _given(body: dict[str, Any]) -> dict[str, Any]:
    """The fields that ask for something: the apps send every field of their form, a time of ``0ms`` for none."""
    return {k: v for k, v in body.items() if not (k in ("delay", "jitter") and _zero_time(v))}


async def _shape(ctx: Context, request: Request, reset: bool) -> Response:
    body = _given(await ctx.body(request))
    name, interface = str(body.get("containerName", "")), str(body.get("interface", ""))
    target, node = await _container(ctx, request, name)
    args = (
        ["--delay", "none", "--jitter", "none", "--loss", "none", "--rate", "none", "--corrupt", "none"]
        if reset
        else changes(body)
    )
    await shape(ctx, target, node, interface, args)
    return JSONResponse({"message": f"Netem parameters of {name}:{interface} {'reset' if reset else 'set'}"})


async def netem_set(ctx: Context, request: Request) -> Response:
    return await _shape(ctx, request, reset=False)


async def netem_reset(ctx: Context, request: Request) -> Response:
    return await _shape(ctx, request, reset=True)
