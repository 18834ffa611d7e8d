"""Signed tokens (JWT, HS256) with a secret kept 0600 in the server's folder, so tokens survive a restart; a token
names its account and uid, expires, and is refused once revoked (logout) or if the account changed."""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass

import jwt

from ..backends.kernel import files
from ..errors import LabError
from .errors import ApiError

ALGORITHM = "HS256"


@dataclass(frozen=True)
class Claims:
    """What a valid token says: who, as which uid, its id and when it ends."""

    name: str
    uid: int
    jti: str
    exp: int


def secret(folder: str) -> bytes:
    """The signing secret in ``folder``/jwt.secret, made (0600, 32 random bytes) at the first start."""
    path = os.path.join(folder, "jwt.secret")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as f:
            held = os.fstat(f.fileno())
            if held.st_uid != os.geteuid() or held.st_mode & 0o077:
                raise LabError(f"{path}: not this server's alone (owner or mode); remove it to make a new one") from None
            return f.read()
    made = secrets.token_bytes(32)
    try:
        os.write(fd, made)  # 32 bytes: one write
    finally:
        os.close(fd)
    return made


class Tokens:
    """Issues and checks tokens; remembers revoked ones (in ``folder``/revoked.json) until they expire."""

    def __init__(self, folder: str, lifetime: int) -> None:
        self.key = secret(folder)
        self.lifetime = lifetime
        self._revoked_path = os.path.join(folder, "revoked.json")
        self._revoked: dict[str, int] = self._read_revoked()

    def issue(self, name: str, uid: int) -> str:
        now = int(time.time())
        claims = {"sub": name, "uid": uid, "iat": now, "exp": now + self.lifetime, "jti": secrets.token_hex(16)}
        return jwt.encode(claims, self.key, algorithm=ALGORITHM)

    def check(self, token: str) -> Claims:
        """The token's claims, or 401 with the reason (bad signature, expired, revoked, malformed)."""
        try:
            raw = jwt.decode(token, self.key, algorithms=[ALGORITHM], options={"require": ["sub", "uid", "exp", "jti"]})
        except jwt.ExpiredSignatureError:
            raise ApiError(401, "token expired: sign in again (POST /login)") from None
        except jwt.InvalidTokenError as exc:
            raise ApiError(401, f"invalid token ({exc}): sign in again (POST /login)") from None
        claims = Claims(str(raw["sub"]), int(raw["uid"]), str(raw["jti"]), int(raw["exp"]))
        if claims.jti in self._revoked:
            raise ApiError(401, "token revoked (signed out): sign in again (POST /login)")
        return claims

    def revoke(self, claims: Claims) -> None:
        now = time.time()
        self._revoked = {jti: exp for jti, exp in self._revoked.items() if exp > now}
        self._revoked[claims.jti] = claims.exp
        files.write(self._revoked_path, json.dumps(self._revoked), mode=0o600)

    def _read_revoked(self) -> dict[str, int]:
        try:
            with open(self._revoked_path, opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as f:
                return {str(k): int(v) for k, v in json.load(f).items()}
        except (OSError, ValueError, AttributeError):
            return {}
