"""Signing in: the machine's password check (PAM, the ``login`` service, as clab-api-server does) and failed logins
limited per user and per address."""

from __future__ import annotations

import time
from collections import defaultdict, deque

import pam

from .errors import ApiError


class Limiter:
    """At most ``tries`` failed logins per ``window`` seconds for a user name and for an address; past that, 429
    until the oldest failure leaves the window."""

    def __init__(self, tries: int = 5, window: float = 60.0) -> None:
        self.tries = tries
        self.window = window
        self._failed: dict[str, deque[float]] = defaultdict(deque)

    def check(self, user: str, address: str) -> None:
        now = time.monotonic()
        for key, what in ((f"user:{user}", f"user '{user}'"), (f"addr:{address}", f"address {address}")):
            seen = self._failed.get(key)
            while seen and seen[0] <= now - self.window:
                seen.popleft()
            if seen is not None and not seen:
                del self._failed[key]  # names tried once and long ago are not kept
            elif seen is not None and len(seen) >= self.tries:
                wait = int(seen[0] + self.window - now) + 1
                raise ApiError(429, f"too many failed logins for {what}: try again in {wait} s")

    def failed(self, user: str, address: str) -> None:
        now = time.monotonic()
        self._failed[f"user:{user}"].append(now)
        self._failed[f"addr:{address}"].append(now)


def password_ok(user: str, password: str, service: str = "login") -> bool:
    """Whether PAM's ``service`` accepts ``password`` for ``user`` (slow on failure: PAM's own delay)."""
    return bool(pam.authenticate(user, password, service=service, resetcreds=False))
