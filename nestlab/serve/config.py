"""How the server is set up: where it listens, TLS, its folder, token lifetime, limits (parsed once from the command
line)."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import LabError

STATE = "/var/lib/nestlab/serve"  # the JWT secret, revoked tokens, the self-signed certificate


@dataclass(frozen=True)
class Listen:
    """HOST:PORT to listen on."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listen:
        try:
            parts = urlsplit(f"//{text}")
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
        if not host or not port:
            raise LabError(f"--listen {text!r}: give HOST:PORT, e.g. 0.0.0.0:8090 or 127.0.0.1:8090")
        return cls(host, port)

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


@dataclass(frozen=True)
class Settings:
    """The server's settings."""

    listen: Listen
    tls: bool = True
    cert: str | None = None
    key: str | None = None
    state: str = STATE
    token_lifetime: int = 3600
    max_body: int = 1 << 20
    deploy_timeout: float = 600
    python: str = sys.executable
    pam_service: str = "login"
