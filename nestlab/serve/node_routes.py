"""The node routes: logs, netem (nestlab's link shaping)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from .. import names
from ..model.endpoint import Endpoint
from ..model.units import parse_percent, parse_rate, parse_time
from .context import Context
from .errors import ApiError
from .lab_routes import container_of, lab_param, short_name
from .labs import Target, failed


async def _node(ctx: Context, request: Request) -> tuple[Target, str, str]:
    """The request's lab (the caller's, 404 otherwise), its node's container name and the node's own name."""
    account, lab = ctx.caller(request), lab_param(request)
    node = request.path_params["node"]
    target = await ctx.labs.one(account, lab)
    container = container_of(target, node)
    return target, container, short_name(target, container)


async def logs(ctx: Context, request: Request) -> Response:
    """The node's ``cmd`` output (its cmd.log): ``tail`` lines (or all), as text or ``format=json``."""
    fmt, tail = request.query_params.get("format", "plain"), request.query_params.get("tail", "all")
    if fmt not in ("plain", "json"):
        raise ApiError(400, f"Invalid format '{fmt}': plain or json")
    if tail != "all" and not tail.isdigit():
        raise ApiError(400, f"Invalid 'tail' parameter '{tail}': a number of lines (0 or more) or 'all'")
    target, container, node = await _node(ctx, request)
    done = await ctx.nestlab.inside(target.owner, "logs", target.lab, node, "0" if tail == "all" else tail)
    if done.code:
        raise failed(done, f"reading the logs of '{container}'")
    if fmt == "json":
        return JSONResponse({"containerName": request.path_params["node"], "logs": done.stdout})
    return PlainTextResponse(done.stdout)


async def _links(ctx: Context, target: Target) -> list[dict[str, Any]]:
    """The lab's links as ``nestlab link show`` has them, read as its owner."""
    done = await ctx.nestlab(target.owner, "link", "show", "--lab", target.lab, "--format", "json", timeout=60)
    if done.code:
        raise failed(done, f"reading the links of lab '{target.lab}'")
    found: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    return found


def _netem(interface: str, shape: dict[str, Any]) -> dict[str, Any]:
    """One interface's shaping in clab-api-server's terms (rate in kbit/s, loss and corruption in %)."""
    return {
        "interface": interface,
        "delay": str(shape.get("delay", "")),
        "jitter": str(shape.get("jitter", "")),
        "packet_loss": parse_percent(shape["loss"]) if "loss" in shape else 0.0,
        "rate": parse_rate(shape["rate"]) // 1000 if "rate" in shape else 0,
        "corruption": parse_percent(shape["corrupt"]) if "corrupt" in shape else 0.0,
    }


async def shaping(ctx: Context, target: Target, node: str) -> list[dict[str, Any]]:
    """What each of ``node``'s link interfaces sends through: the shaping nestlab applies on it, as netem's fields."""
    shown = []
    for link in await _links(ctx, target):
        for sender, shape in link["sends"].items():
            end = Endpoint(sender)
            if end.node == node:
                shown.append(_netem(end.iface, shape))
    return shown


async def netem_show(ctx: Context, request: Request) -> Response:
    target, container, node = await _node(ctx, request)
    return JSONResponse({request.path_params["node"]: await shaping(ctx, target, node)})


async def _link_of(ctx: Context, target: Target, node: str, interface: str) -> tuple[str, str, str]:
    """The link whose end is ``node:interface``: its two ends and the direction that end sends in."""
    if not names.is_ifname(interface):
        raise ApiError(400, f"Invalid interface name {json.dumps(interface[:40])}")
    end = f"{node}:{interface}"
    for link in await _links(ctx, target):
        a, b = list(link["sends"])
        if end in (a, b):
            return a, b, "a" if end == a else "b"
    raise ApiError(404, f"Interface '{interface}' of node '{node}' is on no link of lab '{target.lab}'")


def changes(body: dict[str, Any]) -> list[str]:
    """``link set``'s options for clab-api-server's netem fields, each checked (400 naming a bad one)."""
    args = []
    try:
        for field, flag in (("delay", "--delay"), ("jitter", "--jitter")):
            if body.get(field):
                parse_time(str(body[field]))
                args += [flag, str(body[field])]
        for field, flag in (("loss", "--loss"), ("corruption", "--corrupt")):
            if body.get(field) not in (None, 0, 0.0):
                value = float(body[field])
                if not 0 <= value <= 100:
                    raise ValueError(f"{field} {value}: a percentage, 0 to 100")
                args += [flag, f"{value}%"]
        if body.get("rate"):
            rate = int(body["rate"])
            if rate <= 0:
                raise ValueError(f"rate {rate}: kbit/s, above 0")
            args += ["--rate", f"{rate}kbit"]
    except (TypeError, ValueError) as exc:
        raise ApiError(400, f"Invalid netem parameters: {exc}") from None
    if body.get("jitter") and not body.get("delay"):
        raise ApiError(400, "Invalid netem parameters: jitter needs a delay")
    if not args:
        raise ApiError(400, "Invalid netem parameters: give delay, jitter, loss, rate or corruption")
    return args


async def shape(ctx: Context, target: Target, node: str, interface: str, args: list[str]) -> None:
    """``node``'s end ``interface`` of its link in ``target`` shaped by ``nestlab link set`` options ``args``, run as
    the lab's owner."""
    a, b, direction = await _link_of(ctx, target, node, interface)
    done = await ctx.nestlab(target.owner, "link", "set", "--lab", target.lab, a, b, *args, "--direction", direction, timeout=60)
    if done.code:
        raise failed(done, f"shaping {node}:{interface}")


async def _link_set(ctx: Context, request: Request, args: list[str]) -> Response:
    target, container, node = await _node(ctx, request)
    interface = request.path_params["interface"]
    await shape(ctx, target, node, interface, args)
    return JSONResponse({"message": f"Netem parameters of {container}:{interface} set ({' '.join(args)})"})


async def netem_set(ctx: Context, request: Request) -> Response:
    return await _link_set(ctx, request, changes(await ctx.body(request)))


async def netem_reset(ctx: Context, request: Request) -> Response:
    none = ["--delay", "none", "--jitter", "none", "--loss", "none", "--rate", "none", "--corrupt", "none"]
    return await _link_set(ctx, request, none)
