"""SSH access to a node through a port of this server, as clab-api-server gives it: ``POST .../nodes/NODE/ssh``
opens a port (:mod:`nestlab.serve.ssh_ports`) for a while, reaching the node's sshd (which asks for the lab's key,
the owner's own keys, or the node's ``credentials:``, docs/management.md); ``GET /api/v1/ssh/sessions`` lists the
caller's, ``DELETE /api/v1/ssh/sessions/PORT`` closes one.  Another user's lab or session is 404."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .context import Context, admin, truthy
from .errors import ApiError
from .lab_routes import container_of, lab_param, short_name
from .ssh_ports import Session, duration


async def request_access(ctx: Context, request: Request) -> Response:
    """Open a port to the caller's lab's node (404 for a lab not theirs), for ``duration`` (default 1h)."""
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    container = container_of(target, request.path_params["node"])
    body = await ctx.body(request)
    wanted = duration(str(body.get("duration") or "1h"))
    username = str(body.get("sshUsername") or "root")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", username):
        raise ApiError(400, f"Invalid sshUsername {username[:40]!r}: a Linux user name")
    now = datetime.now(UTC)
    session = Session(0, account.name, target.owner, lab, short_name(target, container), container, username, now, now + wanted)
    await ctx.ssh.start(session)
    host = request.url.hostname or ctx.settings.listen.host
    return JSONResponse(
        {
            "port": session.port,
            "host": host,
            "username": username,
            "expiration": session.expiration.isoformat(),
            "command": f"ssh -p {session.port} {username}@{host}",
        }
    )


async def list_sessions(ctx: Context, request: Request) -> Response:
    """The caller's open SSH ports (``all=true``: every user's, administrators only)."""
    account = ctx.caller(request)
    every = truthy(request.query_params.get("all"))
    if every:
        admin(account, "Listing every user's SSH sessions needs superuser privileges")
    return JSONResponse([s.info() for s in ctx.ssh.of(account, every)])


async def close_session(ctx: Context, request: Request) -> Response:
    """Close one of the caller's SSH ports (an administrator: anyone's); 404 for a port not theirs."""
    account, port = ctx.caller(request), request.path_params["port"]
    found = next((s for s in ctx.ssh.of(account, account.admin) if str(s.port) == port), None)
    if found is None:
        raise ApiError(404, f"No SSH session on port {port[:10]!r}")
    await ctx.ssh.close(found.port)
    return JSONResponse({"message": f"SSH session on port {found.port} closed"})
