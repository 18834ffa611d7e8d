"""Run the server: TLS by default (the certificate given, else a self-signed one made at the first start), plain
HTTP only where asked and, off loopback, only when forced."""

from __future__ import annotations

import copy
import os
import re
from logging import Filter, LogRecord
from pathlib import Path

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from ..errors import LabError
from .app import build
from .config import Settings
from .tls import self_signed

_TOKEN = re.compile(r"token=[^&\s]+")


class TokensHidden(Filter):
    """Log lines (the access log's, a WebSocket's path) without the tokens a query string carries."""

    def filter(self, record: LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_TOKEN.sub("token=...", a) if isinstance(a, str) else a for a in record.args)
        return True


def _closed_to_users(python: str) -> str | None:
    """The first folder on the way to ``python`` (or the file) others may not enter or run, if any, as given and
    with its links resolved (a venv's interpreter is a link out of it): users' commands are run with it."""
    for path in (Path(os.path.abspath(python)), Path(os.path.realpath(python))):
        for part in [*reversed(path.parents), path]:
            if not part.stat().st_mode & 0o001:
                return str(part)
    return None


def check(settings: Settings, force: bool) -> None:
    """Refuse what the server could not run as: not root, plain HTTP off loopback unless forced, an interpreter
    other users cannot run, half a certificate."""
    if os.geteuid() != 0 or os.path.exists("/run/nestlab-rootless"):
        raise LabError("nestlab serve runs as the machine's root: it runs each user's labs as that user (run it with sudo)")
    if not settings.tls and not settings.listen.loopback and not force:
        raise LabError(
            f"--no-tls on {settings.listen.host}, which is not loopback: passwords and tokens would cross the network "
            "in clear; serve TLS (the default), listen on 127.0.0.1 behind a TLS proxy, or add --force"
        )
    if blocked := _closed_to_users(settings.python):
        raise LabError(
            f"{blocked} is closed to other users, so they cannot run this nestlab ({settings.python}): install it where "
            "every user may read and run it (e.g. a venv under /opt)"
        )
    if bool(settings.cert) != bool(settings.key):
        raise LabError("give --cert and --key together (or neither: a self-signed certificate is made)")


def serve(settings: Settings, force: bool = False) -> None:
    """Serve until stopped (SIGINT/SIGTERM)."""
    check(settings, force)
    app = build(settings)
    tls: dict[str, str] = {}
    if settings.tls:
        cert, key = (settings.cert, settings.key) if settings.cert and settings.key else self_signed(settings.state)
        tls = {"ssl_certfile": cert, "ssl_keyfile": key}
    logging = copy.deepcopy(LOGGING_CONFIG)
    logging["filters"] = {"tokens": {"()": TokensHidden}}
    for handler in logging["handlers"].values():
        handler["filters"] = ["tokens"]
    uvicorn.run(app, host=settings.listen.host, port=settings.listen.port, ws="websockets-sansio", log_config=logging, **tls)  # type: ignore[arg-type]
