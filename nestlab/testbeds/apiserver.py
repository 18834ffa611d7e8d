"""A ``nestlab serve`` to try and measure on this machine: Linux users made for it (passwords set with chpasswd,
groups as clab-api-server's setup makes them; removed after with their processes and homes), a venv of Debian's
Python with nestlab[serve] installed from a copy of a checkout (the server runs each user's commands with its own
interpreter, which the users must be able to run), the server on 127.0.0.1, and a client of it.  Used by
tests/test_serve.py and benchmarks/serve.py."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backends.kernel import procs

PYTHON = "/usr/bin/python3"  # Debian's: a test's own interpreter may live where the users cannot read (/root)
GROUPS = ("clab_api", "clab_admins", "nestlab")


def _run(*argv: str, stdin: str | None = None) -> None:
    subprocess.run(argv, input=stdin, text=True, check=True, capture_output=True)


def end_processes(uid: int) -> None:
    """Every process of the user ``uid`` ended (its holder, its labs' nodes)."""
    for _ in range(50):
        pids = procs.of_uid(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _free_subordinate_range(count: int = 65536) -> str:
    """A range of ``count`` ids past every range /etc/subuid and /etc/subgid lend (``FIRST-LAST``)."""
    first = 100000
    for table in ("/etc/subuid", "/etc/subgid"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines():
                parts = line.split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    first = max(first, int(parts[1]) + int(parts[2]))
    return f"{first}-{first + count - 1}"


def _has_subordinate_ids(name: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        return all(
            any(line.split(":")[0] == name for line in Path(table).read_text().splitlines())
            for table in ("/etc/subuid", "/etc/subgid")
        )
    return False


@contextlib.contextmanager
def users(wanted: Mapping[str, tuple[str, Sequence[str]]], subordinate: Collection[str] = ()) -> Iterator[None]:
    """The users ``{name: (password, groups)}`` made (with homes), and the groups they need; those named in
    ``subordinate`` given subordinate ids in /etc/subuid and /etc/subgid (so their rootless nodes can run sshd,
    docs/rootless.md) if useradd gave them none; all removed after."""
    made_groups = [g for g in GROUPS if subprocess.run(["getent", "group", g], capture_output=True).returncode]
    for group in made_groups:
        _run("groupadd", group)
    lent: dict[str, str] = {}
    tables = [Path(t) for t in ("/etc/subuid", "/etc/subgid") if subordinate and not Path(t).exists()]
    for table in tables:  # usermod lends ids only where the tables exist
        table.touch(0o644)
    try:
        for name, (password, groups) in wanted.items():
            _run("useradd", "-m", "-s", "/bin/bash", *(["-G", ",".join(groups)] if groups else []), name)
            _run("chpasswd", stdin=f"{name}:{password}\n")
            if name in subordinate and not _has_subordinate_ids(name):
                lent[name] = _free_subordinate_range()
                _run("usermod", "--add-subuids", lent[name], "--add-subgids", lent[name], name)
        yield
    finally:
        for name in wanted:
            with contextlib.suppress(KeyError):
                end_processes(pwd.getpwnam(name).pw_uid)
            if name in lent:
                subprocess.run(["usermod", "--del-subuids", lent[name], "--del-subgids", lent[name], name], capture_output=True)
            subprocess.run(["userdel", "-r", name], capture_output=True)
        for group in made_groups:
            subprocess.run(["groupdel", group], capture_output=True)
        for table in tables:
            if not table.read_text().strip():
                table.unlink()


def venv(checkout: Path, base: Path) -> Path:
    """A venv in ``base`` (which must be readable by all) with nestlab[serve] from a copy of ``checkout``'s files
    (tracked and new, as git lists them); its path."""
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(checkout), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    src = base / "src"
    for rel in filter(None, listed.decode().split("\0")):
        if (checkout / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(checkout / rel, src / rel)
    made = base / "venv"
    done = subprocess.run(
        f"{PYTHON} -m venv {made} && {made}/bin/pip install -q '{src}[serve]'", shell=True, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"installing nestlab[serve] failed: {done.stderr[-3000:]}")
    return made


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Answer:
    """An HTTP answer: its status, its body parsed as JSON (None if it is not), and its text."""

    status: int
    body: object
    text: str


class Server:
    """``nestlab serve`` from ``venv`` on 127.0.0.1 (its state in ``state``), started, and a client of it."""

    def __init__(self, venv: Path, state: Path, *args: str) -> None:
        self.port = free_port()
        self.tls = "--no-tls" not in args
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.state = state
        self.log = state / "server.log"
        command = [str(venv / "bin" / "python"), "-m", "nestlab.cli.app", "serve", "--listen", f"127.0.0.1:{self.port}"]
        log = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            self.proc = subprocess.Popen([*command, "--state", str(state), *args], stdout=log, stderr=log, cwd="/")
        finally:
            os.close(log)
        self._context = ssl._create_unverified_context() if self.tls else None  # its own self-signed certificate
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nestlab serve ended: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                if self.call("GET", "/health").status == 200:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"nestlab serve did not answer: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def call(self, method: str, path: str, body: object = None, token: str | None = None, timeout: float = 600) -> Answer:
        """The answer to a request (a TimeoutError past ``timeout`` seconds)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._context) as got:
                status, text = got.status, got.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
        try:
            parsed: object = json.loads(text)
        except ValueError:
            parsed = None
        return Answer(status, parsed, text)

    def login(self, user: str, password: str) -> str:
        got = self.call("POST", "/login", {"username": user, "password": password})
        if got.status != 200 or not isinstance(got.body, dict):
            raise RuntimeError(f"login of {user} failed: {got.status} {got.text}")
        return str(got.body["token"])
