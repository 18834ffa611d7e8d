"""The machine and server `nestlab serve`'s tests share (one per run, docs/serve.md): real Linux users made here
(PAM against passwords set with chpasswd, removed after), a venv of Debian's Python with nestlab and its ``serve``
extra installed from a copy of this checkout (the suite's own may live where the users cannot read), and the server
on 127.0.0.1 without TLS."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from nestlab.testbeds import apiserver

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "nlserve"
# name: (password, groups)
USERS = {
    f"{PREFIX}-admin": ("Adm1n-pass-x", ["clab_admins"]),
    f"{PREFIX}-alice": ("Al1ce-pass-x", ["clab_api"]),
    f"{PREFIX}-bob": ("B0b-pass-xyz", ["nestlab"]),
    f"{PREFIX}-eve": ("Ev3-pass-xyz", []),
}


class Server(apiserver.Server):
    def login(self, user: str, password: str | None = None) -> str:
        return super().login(user, password or USERS[user][0])


@pytest.fixture(scope="session")
def serve_machine():
    """The users and groups (made here, removed after), and a venv with nestlab[serve] any user can run."""
    base = Path(tempfile.mkdtemp(prefix="nestlab-serve-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with apiserver.users(USERS, subordinate=[f"{PREFIX}-alice"]):  # her nodes run sshd (docs/rootless.md)
            yield apiserver.venv(ROOT, base), base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def server(serve_machine):
    venv, base = serve_machine
    running = Server(venv, base / "state", "--no-tls")
    try:
        yield running
    finally:
        running.stop()
