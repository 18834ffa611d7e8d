"""The ASGI application: clab-api-server's routes (docs/serve.md lists them), every error answered as
``{"error": reason}`` with its status, never a stack trace."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from . import account_routes as accounts
from . import generate_routes
from . import lab_routes as labs
from . import node_routes as nodes
from . import session_routes as sessions
from . import ssh_access as ssh
from . import workspace_routes as files
from .config import Settings
from .context import Context
from .errors import ApiError
from .events import events
from .terminal import terminal

log = logging.getLogger("nestlab.serve")
Handler = Callable[[Context, Request], Awaitable[Response]]

LAB = "/api/v1/labs/{lab}"
NODE = LAB + "/nodes/{node}"
ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/health", accounts.health, ["GET"]),
    ("/login", accounts.login, ["POST"]),
    ("/logout", accounts.logout, ["POST"]),
    ("/api/v1/health/metrics", accounts.metrics, ["GET"]),
    ("/api/v1/version", accounts.version, ["GET"]),
    ("/api/v1/version/check", accounts.version_check, ["GET"]),
    ("/api/v1/users", accounts.users, ["GET"]),
    ("/api/v1/users", accounts.users_refused, ["POST"]),
    ("/api/v1/users/{name}", accounts.user, ["GET"]),
    ("/api/v1/users/{name}", accounts.users_refused, ["PUT", "DELETE"]),
    ("/api/v1/users/{name}/password", accounts.users_refused, ["PUT"]),
    ("/api/v1/generate", generate_routes.generate, ["POST"]),
    ("/api/v1/events", files.events_stream, ["GET"]),
    ("/api/v1/labs/topology/files", files.topology_files, ["GET"]),
    ("/api/v1/labs/workspace/tree", files.tree, ["GET"]),
    ("/api/v1/labs/workspace/file", files.workspace_file, ["GET", "HEAD", "PUT", "DELETE"]),
    ("/api/v1/labs/workspace/file/rename", files.workspace_rename, ["POST"]),
    ("/api/v1/labs/workspace/directory", files.workspace_directory, ["POST"]),
    ("/api/v1/labs/workspace/events", files.quiet_stream, ["GET"]),
    ("/api/v1/tools/netem/show", sessions.netem_show, ["GET"]),
    ("/api/v1/tools/netem/set", sessions.netem_set, ["POST"]),
    ("/api/v1/tools/netem/reset", sessions.netem_reset, ["POST"]),
    ("/api/v1/terminal-sessions/{session}", sessions.show, ["GET"]),
    ("/api/v1/terminal-sessions/{session}", sessions.close, ["DELETE"]),
    (LAB + "/deploy", files.deploy_file, ["POST"]),
    (LAB + "/apply", files.deploy_file, ["POST"]),
    (LAB + "/topology/yaml", files.lab_yaml, ["GET", "PUT"]),
    (LAB + "/topology/annotations", files.lab_annotations, ["GET", "PUT"]),
    (LAB + "/topology/file", files.lab_file, ["GET", "HEAD", "PUT", "DELETE"]),
    (LAB + "/topology/file/rename", files.lab_rename, ["POST"]),
    (LAB + "/topology/events", files.quiet_stream, ["GET"]),
    (NODE + "/terminal-sessions", sessions.create, ["POST"]),
    ("/api/v1/ui/custom-nodes", files.custom_nodes, ["GET"]),
    ("/api/v1/ui/icons", files.icons, ["GET"]),
    (LAB + "/ui/icons", files.icons, ["GET"]),
    (LAB + "/ui/icons/reconcile", files.icons, ["POST"]),
    ("/api/v1/labs", labs.list_labs, ["GET"]),
    ("/api/v1/labs", labs.deploy, ["POST"]),
    (LAB, labs.inspect, ["GET"]),
    (LAB, labs.redeploy, ["PUT"]),
    (LAB, labs.destroy, ["DELETE"]),
    (LAB + "/interfaces", labs.interfaces, ["GET"]),
    (LAB + "/save", labs.save, ["POST"]),
    (LAB + "/exec", labs.exec_command, ["POST"]),
    (NODE + "/logs", nodes.logs, ["GET"]),
    (NODE + "/ssh", ssh.request_access, ["POST"]),
    ("/api/v1/ssh/sessions", ssh.list_sessions, ["GET"]),
    ("/api/v1/ssh/sessions/{port}", ssh.close_session, ["DELETE"]),
    (NODE + "/netem", nodes.netem_show, ["GET"]),
    (NODE + "/interfaces/{interface}/netem", nodes.netem_set, ["PUT"]),
    (NODE + "/interfaces/{interface}/netem", nodes.netem_reset, ["DELETE"]),
]


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse({"error": exc.reason}, status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    reason = {404: "no such route", 405: f"method {request.method} not allowed here"}.get(exc.status_code, str(exc.detail))
    return JSONResponse({"error": reason}, status_code=exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path)
    return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server's log has the details"}, status_code=500)


def build(settings: Settings) -> Starlette:
    """The application, its state made (the JWT secret on the first start)."""
    ctx = Context(settings)
    routes: list[Route | WebSocketRoute] = [
        Route(path, functools.partial(handler, ctx), methods=methods) for path, handler, methods in ROUTES
    ]
    routes.append(WebSocketRoute(NODE + "/terminal", functools.partial(terminal, ctx)))
    routes.append(WebSocketRoute("/api/v1/events", functools.partial(events, ctx)))
    routes.append(WebSocketRoute("/api/v1/terminal-sessions/{session}/stream", functools.partial(sessions.stream, ctx)))
    return Starlette(
        routes=routes,
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _unexpected},
    )
