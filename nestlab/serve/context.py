"""What every route uses: the settings, tokens, the login limiter, the labs, and the caller of a request."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from starlette.requests import HTTPConnection, Request

from . import accounts, tokens
from .accounts import Account
from .config import Settings
from .errors import ApiError
from .labs import Labs, refuse_nul
from .logins import Limiter
from .runner import Nestlab
from .ssh_ports import Sessions


class Context:
    """The server's state, shared by its routes."""

    def __init__(self, settings: Settings) -> None:
        os.makedirs(settings.state, mode=0o700, exist_ok=True)
        self.settings = settings
        self.tokens = tokens.Tokens(settings.state, settings.token_lifetime)
        self.limiter = Limiter()
        self.nestlab = Nestlab(settings.python)
        self.labs = Labs(self.nestlab, settings.deploy_timeout)
        self.ssh = Sessions(settings.listen.host, self.nestlab)
        self.started = time.time()

    def caller(self, conn: HTTPConnection) -> Account:
        """The account a request's token names (``Authorization: Bearer``, or ``?token=`` on a WebSocket), checked
        now: the token valid and unrevoked, the account still there with the same uid and still in an allowing group."""
        return self.account(self.claims(conn))

    def claims(self, conn: HTTPConnection) -> tokens.Claims:
        scheme, _, token = conn.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            token = conn.query_params.get("token", "") if conn.scope["type"] == "websocket" else ""
        if not token:
            raise ApiError(401, "Authorization header with a Bearer token required: sign in with POST /login")
        return self.tokens.check(token.strip())

    @staticmethod
    def account(claims: tokens.Claims) -> Account:
        account = accounts.lookup(claims.name)
        if account is None:
            allowed = ", ".join((*accounts.USER_GROUPS, *accounts.ADMIN_GROUPS))
            raise ApiError(401, f"user '{claims.name}' may no longer sign in here (not in {allowed}): token refused")
        if account.uid != claims.uid:
            raise ApiError(401, f"user '{claims.name}' is not the account this token was issued to: sign in again")
        return account

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object, read up to the body limit (413 past it, 400 if it is not a JSON object)."""
        limit = self.settings.max_body
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError(413, f"request body of {declared} bytes is over this server's limit of {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body is over this server's limit of {limit} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
            raise ApiError(400, f"Invalid request body: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Invalid request body: a JSON object expected")
        refuse_nul(data, "request body")
        return data


def admin(account: Account, reason: str = "Superuser privileges required") -> None:
    """403 unless ``account`` is an administrator."""
    if not account.admin:
        raise ApiError(403, f"{reason} (members of {', '.join(accounts.ADMIN_GROUPS)})")


def truthy(text: str | None) -> bool:
    return (text or "").lower() in ("1", "true", "yes")
