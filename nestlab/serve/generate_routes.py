"""``POST /api/v1/generate``: a CLOS topology made by ``nestlab clab generate`` run as the caller, returned as YAML,
written to a file of the caller's (``outputFile``, from their home), or deployed as ``POST /api/v1/labs`` deploys
(``deploy``: its file in ~/.clab/NAME, 409 for a lab the caller already runs)."""

from __future__ import annotations

import os
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .context import Context
from .errors import ApiError
from .lab_routes import deploy_text
from .labs import checked_name, failed, topology_text, write_file
from .runner import RunAs

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # a kind, a type, a prefix
_IMAGE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:@+-]{0,255}")


def _word(what: str, value: object) -> str:
    text = str(value)
    if not _WORD.fullmatch(text):
        raise ApiError(400, f"Invalid {what} {text[:40]!r}: letters, digits, '_', '.' and '-'")
    return text


def _tiers(body: dict[str, Any], kind: str) -> str:
    """``--nodes``' value for the request's tiers (each ``count`` 1 or more, its ``kind`` and ``type``)."""
    tiers = body.get("tiers")
    if not isinstance(tiers, list) or not tiers or not all(isinstance(t, dict) for t in tiers):
        raise ApiError(400, "Invalid 'tiers': a list of at least one {count, kind, type}")
    parts = []
    for tier in tiers:
        count = tier.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1000:
            raise ApiError(400, f"Invalid tier count {count!r}: 1 to 1000")
        typ = f":{_word('type', tier['type'])}" if tier.get("type") else ""
        parts.append(f"{count}:{_word('kind', tier.get('kind') or kind)}{typ}")
    return ",".join(parts)


def _per_kind(body: dict[str, Any], field: str, flag: str, pattern: re.Pattern[str]) -> list[str]:
    given = body.get(field) or {}
    if not isinstance(given, dict):
        raise ApiError(400, f"Invalid '{field}': an object of kind to value")
    args = []
    for kind, value in given.items():
        if not pattern.fullmatch(str(value)):
            raise ApiError(400, f"Invalid {field} value {str(value)[:60]!r} for kind {kind!r}")
        args += [flag, f"{_word('kind', kind)}={value}"]
    return args


def arguments(body: dict[str, Any]) -> list[str]:
    """``nestlab clab generate``'s command line for a request's body, each value checked (400 naming a bad one)."""
    name = checked_name("lab", str(body.get("name") or ""))
    kind = _word("defaultKind", body.get("defaultKind") or "linux")
    args = ["clab", "generate", "--name", name, "--nodes", _tiers(body, kind), "--kind", kind]
    for field, flag in (("nodePrefix", "--node-prefix"), ("groupPrefix", "--group-prefix"), ("managementNetwork", "--network")):
        if body.get(field):
            args += [flag, _word(field, body[field])]
    for field, flag in (("ipv4Subnet", "--ipv4-subnet"), ("ipv6Subnet", "--ipv6-subnet")):
        if body.get(field):
            if not re.fullmatch(r"[0-9A-Fa-f.:]+/\d{1,3}", str(body[field])):
                raise ApiError(400, f"Invalid {field} {str(body[field])[:40]!r}: an address/prefix")
            args += [flag, str(body[field])]
    return [*args, *_per_kind(body, "images", "--image", _IMAGE), *_per_kind(body, "licenses", "--license", _IMAGE)]


async def generate(ctx: Context, request: Request) -> Response:
    account = ctx.caller(request)
    body = await ctx.body(request)
    args = arguments(body)
    caller = RunAs.user(account)
    made = await ctx.nestlab(caller, *args, timeout=60)
    if made.code:
        raise failed(made, "generating the topology")
    name = args[3]
    if body.get("deploy"):
        text, document = topology_text(made.stdout)
        output = await deploy_text(ctx, account, text, document, name, False, [])
        return JSONResponse(
            {
                "message": f"Topology '{name}' generated and deployed successfully",
                "deployOutput": output,
                "savedFilePath": os.path.join(caller.home, ".clab", name, f"{name}.clab.yml"),
            }
        )
    if output_file := str(body.get("outputFile") or ""):
        path = os.path.normpath(os.path.join(caller.home, output_file))
        saved = await write_file(caller, os.path.dirname(path), os.path.basename(path), made.stdout)
        return JSONResponse({"message": f"Topology '{name}' generated and saved", "savedFilePath": saved})
    return JSONResponse({"message": f"Topology '{name}' generated", "topologyYaml": made.stdout})
