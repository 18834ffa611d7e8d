"""Signing in and out, health and version, the machine's metrics (administrators), and the accounts (read only:
the machine's accounts are its administrators' to make, with their own tools)."""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import __version__
from . import accounts
from .context import Context, admin
from .errors import ApiError
from .labs import checked_name
from .logins import password_ok

# One answer for a wrong password, an unknown name and an account outside the groups: no oracle of either.
REFUSED = f"Invalid username or password, or an account in none of the groups {', '.join((*accounts.USER_GROUPS, *accounts.ADMIN_GROUPS))}"
COMPATIBLE = "0.79.0"  # the containerlab release whose commands this server's nestlab answers as (nestlab clab version)


def _started(ctx: Context) -> dict[str, str]:
    up = datetime.timedelta(seconds=int(time.time() - ctx.started))
    start = datetime.datetime.fromtimestamp(ctx.started, datetime.UTC).isoformat().replace("+00:00", "Z")
    return {"version": f"nestlab-{__version__}", "uptime": str(up), "startTime": start}


async def health(ctx: Context, request: Request) -> Response:
    return JSONResponse({"status": "healthy", **_started(ctx)})


async def login(ctx: Context, request: Request) -> Response:
    """A token for a Linux account whose groups let it in and whose password PAM accepts; 401 otherwise (the same
    answer whichever it was), 429 after too many failures for the name or the address."""
    body = await ctx.body(request)
    name, password = body.get("username"), body.get("password")
    if not isinstance(name, str) or not isinstance(password, str) or not name or not password:
        raise ApiError(400, "Request body must include 'username' and 'password'")
    if len(name) > 64 or len(password) > 4096:
        raise ApiError(401, REFUSED)
    address = request.client.host if request.client else "-"
    ctx.limiter.check(name, address)
    account = accounts.lookup(name)  # asked first: PAM is never asked about an account the groups keep out
    if account is None or not await asyncio.to_thread(password_ok, name, password, ctx.settings.pam_service):
        ctx.limiter.failed(name, address)
        raise ApiError(401, REFUSED)
    return JSONResponse({"token": ctx.tokens.issue(account.name, account.uid)})


async def logout(ctx: Context, request: Request) -> Response:
    """Revoke the request's token: it is refused from now on, even before it expires."""
    claims = ctx.claims(request)
    ctx.tokens.revoke(claims)
    return JSONResponse({"message": "signed out: this token is revoked"})


async def version(ctx: Context, request: Request) -> Response:
    ctx.caller(request)
    return JSONResponse(
        {
            "versionInfo": f"version: {COMPATIBLE}\ncommit: nestlab-{__version__}\ndate: -\n"
            "source: nestlab (containerlab-compatible commands and API: nestlab serve)"
        }
    )


async def version_check(ctx: Context, request: Request) -> Response:
    ctx.caller(request)
    return JSONResponse(
        {"checkResult": f"nestlab answers as containerlab {COMPATIBLE} and never asks the network for a newer one"}
    )


def _cpu_busy() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return 100.0 * (1 - (fields[3] + fields[4]) / max(sum(fields), 1))


def _memory() -> dict[str, float | int]:
    found = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value, *_unit = line.split()
            found[key.rstrip(":")] = int(value) * 1024
    used = found["MemTotal"] - found.get("MemAvailable", found.get("MemFree", 0))
    return {
        "totalMem": found["MemTotal"],
        "usedMem": used,
        "availableMem": found["MemTotal"] - used,
        "usagePercent": 100.0 * used / found["MemTotal"],
    }


async def metrics(ctx: Context, request: Request) -> Response:
    admin(ctx.caller(request), "Forbidden: superuser privileges required")
    disk = shutil.disk_usage("/")
    return JSONResponse(
        {
            "serverInfo": _started(ctx),
            "metrics": {
                "cpu": {"usagePercent": _cpu_busy(), "numCPU": os.cpu_count() or 1},
                "mem": _memory(),
                "disk": {
                    "path": "/",
                    "totalDisk": disk.total,
                    "usedDisk": disk.used,
                    "freeDisk": disk.free,
                    "usagePercent": 100.0 * disk.used / disk.total,
                },
            },
        }
    )


async def users(ctx: Context, request: Request) -> Response:
    admin(ctx.caller(request))
    found = (accounts.lookup(name) for name in accounts.members())
    return JSONResponse([accounts.details(a) for a in found if a is not None])


async def user(ctx: Context, request: Request) -> Response:
    caller, name = ctx.caller(request), checked_name("user", request.path_params["name"])
    if name != caller.name and not caller.admin:
        raise ApiError(403, f"permission denied: user '{caller.name}' may see only their own account")
    account = accounts.lookup(name)
    if account is None:
        raise ApiError(404, f"User '{name}' not found (or not in a group this server allows)")
    return JSONResponse(accounts.details(account))


async def users_refused(ctx: Context, request: Request) -> Response:
    """Making, changing and removing the machine's accounts: refused on purpose, for everyone."""
    caller, name = ctx.caller(request), request.path_params.get("name")
    if not caller.admin and name != caller.name:
        raise ApiError(403, "Superuser privileges required (permission denied)")
    if name is not None and accounts.lookup(checked_name("user", name)) is None:
        raise ApiError(404, f"User '{name}' not found (or not in a group this server allows)")
    if name == caller.name and request.method == "DELETE":
        raise ApiError(403, "permission denied: you cannot delete your own account")
    raise ApiError(
        403,
        "permission denied: nestlab serve does not create, change or remove the machine's accounts or passwords; an "
        "administrator does, with useradd/usermod -aG clab_api/passwd on the machine",
    )
