"""The lab routes: list, deploy, inspect, redeploy, destroy, interfaces, save, exec."""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from .accounts import Account
from .context import Context, truthy
from .errors import ApiError
from .labs import Target, bind_sources, checked_name, failed, remove_folder, topology_text, unreadable, write_file
from .runner import EXISTS, RunAs


def lab_param(request: HTTPConnection) -> str:
    return checked_name("lab", request.path_params["lab"])


async def list_labs(ctx: Context, request: Request) -> Response:
    return JSONResponse(await ctx.labs.listing(ctx.caller(request)))


async def inspect(ctx: Context, request: Request) -> Response:
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    if truthy(request.query_params.get("details")):
        done = await ctx.nestlab(target.owner, "clab", "inspect", "--name", lab, "--details", timeout=120)
        if done.code:
            raise failed(done, f"inspecting lab '{lab}'")
        return JSONResponse(json.loads(done.stdout).get(lab, []))
    return JSONResponse(target.containers)


async def deploy(ctx: Context, request: Request) -> Response:
    """Deploy a topology given as JSON (or YAML text) or by URL, as the caller (an administrator's as root)."""
    account = ctx.caller(request)
    body = await ctx.body(request)
    query = request.query_params
    reconfigure = truthy(query.get("reconfigure"))
    content, url = body.get("topologyContent"), body.get("topologySourceUrl")
    if not content and not url:
        raise ApiError(400, "Request body must include either 'topologyContent' or 'topologySourceUrl'")
    if content and url:
        raise ApiError(400, "Request body cannot include both 'topologyContent' and 'topologySourceUrl'")
    extra = []
    if override := query.get("labNameOverride"):
        extra += ["--name", checked_name("labNameOverride", override)]
    if nodes := query.get("nodeFilter"):
        extra += ["--node-filter", ",".join(checked_name("node", n) for n in nodes.split(","))]
    runs_as = RunAs.root() if account.admin else RunAs.user(account)
    if url:
        return await _deploy_url(ctx, runs_as, str(url), reconfigure, extra)
    text, document = topology_text(content)
    return JSONResponse(await deploy_text(ctx, account, text, document, override or str(document["name"]), reconfigure, extra))


async def deploy_text(
    ctx: Context, account: Account, text: str, document: dict[str, Any], lab: str, reconfigure: bool, extra: list[str]
) -> dict[str, Any]:
    """Deploy a topology (its YAML ``text``, parsed as ``document``) as ``lab``: its file written to ~/.clab, then,
    in one process of the owner's, the lab found absent (409 unless ``reconfigure``), the file put in place, the
    lab deployed and inspected; what inspect says of it."""
    runs_as = RunAs.root() if account.admin else RunAs.user(account)
    if reconfigure and account.admin:
        try:
            runs_as = (await ctx.labs.one(account, lab)).owner  # an administrator reconfigures the lab where it is
        except ApiError:
            pass
    writer = RunAs.user(account) if runs_as.is_root else runs_as
    folder = os.path.join(writer.home, ".clab", lab)  # the lab's name (an override's too): never another lab's file
    if refused := await unreadable(runs_as, bind_sources(document, folder)):
        raise ApiError(
            403, f"binds of files {writer.name} cannot read: {', '.join(refused)} (a lab binds only what its user may read)"
        )
    fresh = not os.path.exists(folder)
    name = f"{lab}.clab.yml"
    staged = await write_file(writer, folder, f".{name}.{secrets.token_hex(4)}", text)
    path = os.path.join(folder, name)
    steps = [] if reconfigure else [["absent", lab]]
    steps += [
        ["replace", staged, path],
        ["clab", "deploy", "-t", path, *(["--reconfigure"] if reconfigure else []), *extra],
        ["clab", "inspect", "--name", lab, "--format", "json"],
    ]
    done = await ctx.nestlab.steps(runs_as, *steps, timeout=ctx.settings.deploy_timeout)
    if done[-1].code:
        await remove_folder(writer, folder if fresh else staged)  # a deploy refused leaves nothing, not even its file
        if done[-1].code == EXISTS and len(done) == 1 and not reconfigure:
            raise ApiError(409, f"Lab '{lab}' already exists. Use 'reconfigure=true' query parameter to overwrite.")
        raise failed(done[-1], f"deploying lab '{lab}'")
    labs: dict[str, Any] = json.loads(done[-1].stdout or "{}")
    if not runs_as.is_root:
        for container in labs.get(lab, []):
            container["owner"] = runs_as.name
    return labs


async def _deploy_url(ctx: Context, runs_as: RunAs, url: str, reconfigure: bool, extra: list[str]) -> Response:
    if not re.fullmatch(r"https?://[^\s\x00]+", url):
        raise ApiError(400, "Invalid topologySourceUrl format: an http(s) URL of a topology file or repository")
    args = ["clab", "deploy", "-t", url, *(["--reconfigure"] if reconfigure else []), *extra]
    done = await ctx.nestlab(runs_as, *args, timeout=ctx.settings.deploy_timeout)
    if done.code:
        raise failed(done, f"deploying {url}")
    return JSONResponse(await ctx.labs.of(runs_as))


async def redeploy(ctx: Context, request: Request) -> Response:
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    if not target.topology:
        raise ApiError(422, f"Lab '{lab}': its topology file is not known, deploy it again (POST /api/v1/labs)")
    args = ["clab", "redeploy", "-t", target.topology]
    if truthy(request.query_params.get("cleanup")):
        args.append("--cleanup")
    done = await ctx.nestlab(target.owner, *args, timeout=ctx.settings.deploy_timeout)
    if done.code:
        raise failed(done, f"redeploying lab '{lab}'")
    return JSONResponse({"message": f"Lab '{lab}' redeployed successfully", "output": await ctx.labs.inspect(target.owner, lab)})


async def destroy(ctx: Context, request: Request) -> Response:
    """Destroy the caller's lab (an administrator: every lab of that name it sees); ``cleanup=true`` also removes
    the lab's folder in ~/.clab, as the folder's owner."""
    account, lab = ctx.caller(request), lab_param(request)
    cleanup = truthy(request.query_params.get("cleanup"))
    targets = await ctx.labs.find(account, lab)
    for target in targets:
        done = await ctx.nestlab(target.owner, "clab", "destroy", "--name", lab, *(["--cleanup"] if cleanup else []), timeout=300)
        if done.code:
            raise failed(done, f"destroying lab '{lab}'")
        if cleanup:
            await _remove_lab_folder(target)
    return JSONResponse({"message": f"Lab '{lab}' destroyed successfully"})


async def _remove_lab_folder(target: Target) -> None:
    """The lab's ~/.clab/LAB folder removed, by its owner, if the lab's file is there."""
    folder = os.path.dirname(target.topology)
    if os.path.basename(folder) != target.lab or os.path.basename(os.path.dirname(folder)) != ".clab":
        return
    try:
        owner = pwd.getpwuid(os.stat(folder).st_uid)
    except (OSError, KeyError):
        return
    await remove_folder(
        RunAs(owner.pw_name, owner.pw_uid, owner.pw_gid, tuple(os.getgrouplist(owner.pw_name, owner.pw_gid)), owner.pw_dir),
        folder,
    )


async def interfaces(ctx: Context, request: Request) -> Response:
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    args = ["clab", "inspect", "interfaces", "--name", lab, "-f", "json"]
    if node := request.query_params.get("node"):
        args += ["--node", checked_name("node", node)]
    done = await ctx.nestlab(target.owner, *args, timeout=120)
    if done.code:
        raise failed(done, f"inspecting the interfaces of lab '{lab}'")
    return JSONResponse(json.loads(done.stdout or "[]"))


async def save(ctx: Context, request: Request) -> Response:
    account, lab = ctx.caller(request), lab_param(request)
    target = await ctx.labs.one(account, lab)
    done = await ctx.nestlab(target.owner, "clab", "save", "--name", lab, timeout=300)
    if done.code:
        raise failed(done, f"saving lab '{lab}'")
    return JSONResponse({"message": f"Configuration for lab '{lab}' saved successfully", "output": done.stderr + done.stdout})


async def exec_command(ctx: Context, request: Request) -> Response:
    """Run a command in the lab's nodes (``nodeFilter``: one node, by its name or container name)."""
    account, lab = ctx.caller(request), lab_param(request)
    body = await ctx.body(request)
    command = body.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ApiError(400, "Request body must include a non-empty 'command'")
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "plain"):
        raise ApiError(400, f"Invalid format '{fmt}': json or plain")
    target = await ctx.labs.one(account, lab)
    args = ["clab", "exec", "--name", lab, "--cmd", command, "-f", fmt]
    if node := request.query_params.get("nodeFilter"):
        args += ["--label", f"clab-node-longname={container_of(target, node)}"]
    done = await ctx.nestlab(target.owner, *args, timeout=300)
    if done.code:
        raise failed(done, f"running a command in lab '{lab}'")
    if fmt == "plain":
        return PlainTextResponse(done.stdout + done.stderr)
    return JSONResponse(json.loads(done.stdout or "{}"))


def container_of(target: Target, node: str) -> str:
    """The container name of the lab's node ``node`` (given by its name or its container name); 400 for another
    lab's container, 404 for a node the lab lacks."""
    checked_name("node", node)
    prefix = f"clab-{target.lab}-"
    for container in target.containers:
        name = str(container["name"])
        if node in (name, name.removeprefix(prefix)):
            return name
    if node.startswith("clab-") and not node.startswith(prefix):
        raise ApiError(400, f"Container '{node}' does not belong to lab '{target.lab}'")
    raise ApiError(404, f"Node '{node}' not found in lab '{target.lab}'")


def short_name(target: Target, container: str) -> str:
    return container.removeprefix(f"clab-{target.lab}-")
