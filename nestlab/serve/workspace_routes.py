"""The routes containerlab's web and desktop apps call beyond clab-api-server's first API: the workspace
(``~/.clab``: its tree, its files, its topology files), a lab's topology file, deploying a lab from its file in
the workspace (its output streamed as NDJSON lines with ``stream=true``) and the events as an NDJSON stream.
Every file is touched by a process of the caller's own (workspace.py)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from . import workspace
from .context import Context, truthy
from .errors import ApiError
from .lab_routes import lab_param
from .labs import bind_sources, failed, topology_text, unreadable
from .runner import RunAs, end, run, spawn

NDJSON = "application/x-ndjson"


def _writer(ctx: Context, request: Request) -> RunAs:
    """The caller, whose workspace the request is about (an administrator's own home too)."""
    return RunAs.user(ctx.caller(request))


def _path(request: Request) -> str:
    path = request.query_params.get("path", "")
    if not path:
        raise ApiError(400, "Query parameter 'path' is required")
    return path


async def topology_files(ctx: Context, request: Request) -> Response:
    """The workspace's topology files, each with whether its lab is deployed now."""
    account = ctx.caller(request)
    who = RunAs.user(account)
    running = await ctx.labs.of(RunAs.root() if account.admin else who)
    return JSONResponse(
        [
            {
                "labName": lab,
                "yamlFileName": name,
                "annotationsFileName": f"{name}.annotations.json",
                "hasAnnotations": annotated,
                "deploymentState": "deployed" if lab in running else "undeployed",
            }
            for lab, name, annotated in await workspace.topologies(who)
        ]
    )


async def tree(ctx: Context, request: Request) -> Response:
    who = _writer(ctx, request)
    relative = request.query_params.get("path", "")
    return JSONResponse(await workspace.listing(who, workspace.inside(who, relative) if relative else workspace.root(who)))


async def _file(who: RunAs, path: str, request: Request) -> Response:
    """GET/HEAD/PUT/DELETE of one file of the workspace (HEAD: whether it is there, and its revision)."""
    if request.method == "PUT":
        await workspace.write(who, path, await request.body())
        return JSONResponse({"message": "saved", "revision": workspace.revision(await workspace.read(who, path))})
    if request.method == "DELETE":
        await workspace.remove(who, path, truthy(request.query_params.get("recursive")))
        return JSONResponse({"message": "deleted"})
    text = await workspace.read(who, path)
    headers = {"X-Topology-Document-Revision": workspace.revision(text)}
    if request.method == "HEAD":
        return Response(headers=headers)
    return PlainTextResponse(text, headers=headers)


async def workspace_file(ctx: Context, request: Request) -> Response:
    who = _writer(ctx, request)
    return await _file(who, workspace.inside(who, _path(request)), request)


async def workspace_directory(ctx: Context, request: Request) -> Response:
    who = _writer(ctx, request)
    folder = workspace.inside(who, str((await ctx.body(request)).get("path", "")))
    done = await run(who, ["mkdir", "-p", "--", folder], timeout=30)
    if done.code:
        raise ApiError(403, f"cannot make {folder} as {who.name}: {done.reason}")
    return JSONResponse({"message": "created"})


async def lab_file(ctx: Context, request: Request) -> Response:
    who, lab = _writer(ctx, request), lab_param(request)
    return await _file(who, workspace.lab_file(who, lab, _path(request)), request)


async def lab_yaml(ctx: Context, request: Request) -> Response:
    who, lab = _writer(ctx, request), lab_param(request)
    return await _file(who, workspace.lab_file(who, lab, lab + workspace.SUFFIX), request)


async def lab_annotations(ctx: Context, request: Request) -> Response:
    who, lab = _writer(ctx, request), lab_param(request)
    return await _file(who, workspace.lab_file(who, lab, f"{lab}{workspace.SUFFIX}.annotations.json"), request)


async def quiet_stream(ctx: Context, request: Request) -> Response:
    """A change stream the apps hold open (workspace and topology file events): nothing is announced here, the
    apps read the files again when they save or open them."""
    ctx.caller(request)

    async def idle() -> AsyncIterator[bytes]:
        while True:
            await asyncio.sleep(30)
            yield b"\n"

    return StreamingResponse(idle(), media_type=NDJSON)


async def deploy_file(ctx: Context, request: Request) -> Response:
    """Deploy (or apply: deploy, or deploy again over a running lab) the lab from its file in the caller's workspace
    (``path``, else ``LAB/LAB.clab.yml``), as the caller (an administrator's as root); ``stream=true``: the
    command's output as NDJSON log lines, then done or error; ``dryRun=true``: whether it would deploy, changing
    nothing."""
    account, lab = ctx.caller(request), lab_param(request)
    who = RunAs.user(account)
    runs_as = RunAs.root() if account.admin else who
    path = workspace.lab_file(who, lab, request.query_params.get("path") or lab + workspace.SUFFIX)
    _text, document = topology_text(await workspace.read(who, path))
    if refused := await unreadable(runs_as, bind_sources(document, os.path.dirname(path))):
        raise ApiError(403, f"binds of files {who.name} cannot read: {', '.join(refused)}")
    running = await ctx.labs.mine(runs_as, lab) is not None
    if truthy(request.query_params.get("dryRun")):  # what apply would do: deploy a lab not running; nothing is changed
        return JSONResponse({"message": "dry run: nothing changed", "result": {"deployedLab": not running}})
    again = truthy(request.query_params.get("cleanup")) or (request.url.path.endswith("/apply") and running)
    argv = ["clab", "deploy", "-t", path, *(["--reconfigure"] if again else [])]
    if not truthy(request.query_params.get("stream")):
        done = await ctx.nestlab(runs_as, *argv, timeout=ctx.settings.deploy_timeout)
        if done.code:
            raise failed(done, f"deploying lab '{lab}'")
        return JSONResponse({"message": f"Lab '{lab}' deployed", "result": await ctx.labs.inspect(runs_as, lab)})
    return StreamingResponse(_lines(ctx, runs_as, argv, f"Lab '{lab}' deployed"), media_type=NDJSON)


async def _lines(ctx: Context, who: RunAs, argv: list[str], finished: str) -> AsyncIterator[bytes]:
    proc = await spawn(
        who,
        ctx.nestlab.argv(*argv),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    tail: list[str] = []
    try:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            text = line.decode(errors="replace").rstrip("\n")
            tail = [*tail[-4:], text]
            yield (json.dumps({"type": "log", "line": text, "stream": "stdout"}) + "\n").encode()
        code = await proc.wait()
        event = {"type": "done", "message": finished} if code == 0 else {"type": "error", "error": "\n".join(tail)}
        yield (json.dumps(event) + "\n").encode()
    finally:
        await end(proc)


async def events_stream(ctx: Context, request: Request) -> Response:
    """``nestlab clab events --format json`` run as the caller, one JSON event a line (``initialState=true``: each
    running container's state first): a user hears of their own labs only, an administrator of root's."""
    account = ctx.caller(request)
    who = RunAs.root() if account.admin else RunAs.user(account)
    initial = ["--initial-state"] if truthy(request.query_params.get("initialState")) else []
    proc = await spawn(
        who,
        ctx.nestlab.argv("clab", "events", "--format", "json", *initial),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )

    async def lines() -> AsyncIterator[bytes]:
        try:
            assert proc.stdout is not None
            while line := await proc.stdout.readline():
                yield line
        finally:
            await end(proc)

    return StreamingResponse(lines(), media_type=NDJSON)


async def custom_nodes(ctx: Context, request: Request) -> Response:
    """The apps' node templates: none kept here (the apps use their built-in kinds)."""
    ctx.caller(request)
    return JSONResponse({"customNodes": [], "defaultNode": ""})


async def icons(ctx: Context, request: Request) -> Response:
    """The apps' custom icons: none kept here (the apps draw their built-in ones)."""
    ctx.caller(request)
    return JSONResponse({"icons": []})


async def _renamed(ctx: Context, request: Request, base: str) -> Response:
    who = _writer(ctx, request)
    body = await ctx.body(request)
    old, new = (workspace.inside(who, os.path.join(base, str(body.get(k, "")))) for k in ("oldPath", "newPath"))
    await workspace.rename(who, old, new)
    return JSONResponse({"message": "renamed"})


async def workspace_rename(ctx: Context, request: Request) -> Response:
    return await _renamed(ctx, request, "")


async def lab_rename(ctx: Context, request: Request) -> Response:
    return await _renamed(ctx, request, lab_param(request))
