"""`nestlab serve` (docs/serve.md): a real server on 127.0.0.1, real Linux users made here (PAM against passwords
set with chpasswd), labs deployed through the API running as their users, and hostile requests that must each get a
4xx with a reason and change nothing.  The server runs from a venv of Debian's Python (the suite's own may live
where the users cannot read) with nestlab and its ``serve`` extra installed from a copy of this checkout."""

from __future__ import annotations

import contextlib
import http.client
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import jwt
import pytest
import websocket

from nestlab.backends.kernel import procs
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
SLEEPER = "sleep 3{n}7.5"  # a node's cmd, found on the machine by its argument


class Server(apiserver.Server):
    def login(self, user: str, password: str | None = None) -> str:
        return super().login(user, password or USERS[user][0])


def _run(*argv: str) -> None:
    subprocess.run(argv, text=True, check=True, capture_output=True)


def _sleepers(argument: str) -> dict[int, int]:
    """pid -> uid of the machine's processes running ``sleep ARGUMENT``."""
    found = {}
    for pid in procs.others():
        if procs.cmdline(pid).split(b"\0")[:2] == [b"sleep", argument.encode()]:
            uid = procs.uids(pid)
            if uid is not None:
                found[pid] = uid[0]
    return found


@pytest.fixture(scope="module")
def machine():
    """The users and groups (made here, removed after), and a venv with nestlab[serve] any user can run."""
    base = Path(tempfile.mkdtemp(prefix="nestlab-serve-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with apiserver.users(USERS):
            yield apiserver.venv(ROOT, base), base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def server(machine):
    venv, base = machine
    state = base / "state"
    running = Server(venv, state, "--no-tls")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def labs(server):
    """Deploys through the API; every lab made is destroyed after (by the administrator, who sees them all)."""
    made: list[str] = []

    def deploy(user: str, name: str, nodes: dict | None = None, links: list | None = None) -> apiserver.Answer:
        topology = {"name": name, "topology": {"nodes": nodes or {"a": {"kind": "linux"}}, "links": links or []}}
        made.append(name)
        return server.call("POST", "/api/v1/labs", {"topologyContent": topology}, server.login(user))

    yield deploy
    admin = server.login(f"{PREFIX}-admin")
    for name in set(made):
        server.call("DELETE", f"/api/v1/labs/{name}?cleanup=true", token=admin)


def test_login_is_the_machines(server):
    """PAM checks the password, the groups let in (clab_api, clab_admins, nestlab), anyone else is refused with why."""
    assert len(server.login(f"{PREFIX}-alice")) > 10
    assert len(server.login(f"{PREFIX}-bob")) > 10  # in nestlab's own group
    wrong = server.call("POST", "/login", {"username": f"{PREFIX}-alice", "password": "not-it"})
    assert wrong.status == 401 and "Invalid username or password" in wrong.text
    outsider = server.call("POST", "/login", {"username": f"{PREFIX}-eve", "password": USERS[f"{PREFIX}-eve"][0]})
    unknown = server.call("POST", "/login", {"username": f"{PREFIX}-nobody", "password": "x"})
    assert outsider.status == unknown.status == 401 and outsider.body == unknown.body == wrong.body  # no oracle
    assert server.call("GET", "/api/v1/labs").status == 401


def test_a_users_lab_runs_as_the_user(server, labs):
    """Two users deploy a lab of the same name: each lab's node process is its user's, on the machine; each user
    lists and inspects only their own."""
    cmd = SLEEPER.format(n=1)
    for user in (f"{PREFIX}-alice", f"{PREFIX}-bob"):
        got = labs(user, "nlsv-same", {"a": {"kind": "linux", "cmd": cmd}})
        assert got.status == 200, got.text
    uids = {pwd.getpwnam(u).pw_uid for u in (f"{PREFIX}-alice", f"{PREFIX}-bob")}
    assert sorted(_sleepers(cmd.split()[1]).values()) == sorted(uids)
    for user in (f"{PREFIX}-alice", f"{PREFIX}-bob"):
        listed = server.call("GET", "/api/v1/labs", token=server.login(user))
        assert listed.status == 200 and isinstance(listed.body, dict)
        assert {c["owner"] for c in listed.body["nlsv-same"]} == {user}
    assert Path(pwd.getpwnam(f"{PREFIX}-alice").pw_dir, ".clab/nlsv-same/nlsv-same.clab.yml").stat().st_uid in uids
    alice = server.login(f"{PREFIX}-alice")
    assert server.call("DELETE", "/api/v1/labs/nlsv-same", token=alice).status == 200
    assert list(_sleepers(cmd.split()[1]).values()) == [pwd.getpwnam(f"{PREFIX}-bob").pw_uid]  # bob's stays


def test_another_users_lab_is_404_everywhere(server, labs):
    """Bob asks every route about Alice's lab: 404 each time, her lab untouched; a terminal on her node is refused
    before the handshake, with the reason."""
    cmd = SLEEPER.format(n=2)
    assert (
        labs(
            f"{PREFIX}-alice",
            "nlsv-hers",
            {"a": {"kind": "linux", "cmd": cmd}, "b": {"kind": "linux"}},
            [{"endpoints": ["a:eth1", "b:eth1"]}],
        ).status
        == 200
    )
    bob = server.login(f"{PREFIX}-bob")
    node = "/api/v1/labs/nlsv-hers/nodes/clab-nlsv-hers-a"
    for method, path, body in [
        ("GET", "/api/v1/labs/nlsv-hers", None),
        ("PUT", "/api/v1/labs/nlsv-hers", None),
        ("DELETE", "/api/v1/labs/nlsv-hers", None),
        ("GET", "/api/v1/labs/nlsv-hers/interfaces", None),
        ("POST", "/api/v1/labs/nlsv-hers/save", None),
        ("POST", "/api/v1/labs/nlsv-hers/exec", {"command": "touch /tmp/bob-was-here"}),
        ("GET", node + "/logs", None),
        ("GET", node + "/netem", None),
        ("PUT", node + "/interfaces/eth1/netem", {"rate": 1000}),
        ("DELETE", node + "/interfaces/eth1/netem", None),
        ("POST", node + "/ssh", None),
    ]:
        got = server.call(method, path, body, bob)
        assert (got.status, got.body) == (404, {"error": "Lab 'nlsv-hers' not found."}), (method, path, got.text)
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(f"ws://127.0.0.1:{server.port}{node}/terminal?token={bob}", timeout=30)
    assert refused.value.status_code == 404 and b"not found" in refused.value.resp_body
    assert "nlsv-hers" not in (server.call("GET", "/api/v1/labs", token=bob).body or {})
    alice = server.login(f"{PREFIX}-alice")
    assert [c["state"] for c in server.call("GET", "/api/v1/labs/nlsv-hers", token=alice).body] == ["running", "running"]  # type: ignore[union-attr]
    assert not Path("/tmp/bob-was-here").exists()
    assert list(_sleepers(cmd.split()[1]).values()) == [pwd.getpwnam(f"{PREFIX}-alice").pw_uid]


def _heard(server: Server, token: str, seconds: float) -> str:
    """What the events WebSocket says in ``seconds`` (with each running container's state first)."""
    stream = websocket.create_connection(f"ws://127.0.0.1:{server.port}/api/v1/events?initial=1&token={token}", timeout=seconds)
    heard = []
    deadline = time.monotonic() + seconds
    try:
        with contextlib.suppress(websocket.WebSocketTimeoutException):
            while time.monotonic() < deadline:
                heard.append(stream.recv())
    finally:
        stream.close()
    return "\n".join(str(h) for h in heard)


def test_events_are_the_callers_own(server, labs):
    """The events WebSocket tells Alice of her lab's containers, and Bob of his own but none of hers."""
    assert labs(f"{PREFIX}-alice", "nlsv-heard", {"a": {"kind": "linux"}}).status == 200
    assert labs(f"{PREFIX}-bob", "nlsv-his", {"a": {"kind": "linux"}}).status == 200
    hers = _heard(server, server.login(f"{PREFIX}-alice"), 8)
    his = _heard(server, server.login(f"{PREFIX}-bob"), 8)
    assert "clab-nlsv-heard-a" in hers and "nlsv-his" not in hers
    assert "clab-nlsv-his-a" in his and "nlsv-heard" not in his


def test_own_lab_routes(server, labs):
    """The owner's routes work: exec (one node), interfaces, logs, netem (a rate the node's qdisc then has), the
    terminal (a command typed, its output read), redeploy, destroy with cleanup."""
    user = f"{PREFIX}-alice"
    links = [{"endpoints": ["a:eth1", "b:eth1"]}]
    assert labs(user, "nlsv-mine", {"a": {"kind": "linux", "cmd": "echo started-a"}, "b": {"kind": "linux"}}, links).status == 200
    token = server.login(user)
    ran = server.call("POST", "/api/v1/labs/nlsv-mine/exec?nodeFilter=clab-nlsv-mine-a", {"command": "hostname"}, token)
    assert ran.status == 200 and ran.body == {
        "clab-nlsv-mine-a": [{"cmd": ["hostname"], "return-code": 0, "stdout": "a\n", "stderr": ""}]
    }
    interfaces = server.call("GET", "/api/v1/labs/nlsv-mine/interfaces", token=token).body
    assert {i["name"] for i in interfaces[0]["interfaces"]} >= {"eth1"}  # type: ignore[index]
    logged = server.call("GET", "/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-a/logs?format=json", token=token)
    assert logged.body == {"containerName": "clab-nlsv-mine-a", "logs": "started-a\n"}
    assert server.call("GET", "/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-a/logs?tail=-1", token=token).status == 400
    assert server.call("GET", "/api/v1/labs/other/nodes/clab-nlsv-mine-a/logs", token=token).status == 404
    assert server.call("GET", "/api/v1/labs/nlsv-mine/nodes/clab-x-a/logs", token=token).status == 400  # another lab's
    shaped = server.call("PUT", "/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-a/interfaces/eth1/netem", {"rate": 2000}, token)
    assert shaped.status == 200, shaped.text
    shown = server.call("GET", "/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-a/netem", token=token).body
    assert shown == {
        "clab-nlsv-mine-a": [
            {"interface": "eth1", "delay": "", "jitter": "", "packet_loss": 0.0, "rate": 2000, "corruption": 0.0}
        ]
    }
    tc = server.call(
        "POST", "/api/v1/labs/nlsv-mine/exec?nodeFilter=a&format=plain", {"command": "tc qdisc show dev eth1"}, token
    )
    assert "htb" in tc.text, tc.text
    assert server.call("DELETE", "/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-a/interfaces/eth1/netem", token=token).status == 200
    term = websocket.create_connection(
        f"ws://127.0.0.1:{server.port}/api/v1/labs/nlsv-mine/nodes/clab-nlsv-mine-b/terminal?token={token}", timeout=30
    )
    try:
        term.send("hostname; exit\n")
        seen = b""
        with contextlib.suppress(websocket.WebSocketConnectionClosedException):
            while chunk := term.recv():  # until the shell exits
                seen += chunk if isinstance(chunk, bytes) else chunk.encode()
        assert re.search(rb"[\r\n]b\r\n", seen), seen  # hostname's answer on a line of its own
        assert b"no job control" not in seen  # the terminal is the shell's controlling one
    finally:
        term.close()
    assert server.call("PUT", "/api/v1/labs/nlsv-mine", token=token).status == 200
    home = Path(pwd.getpwnam(user).pw_dir)
    assert server.call("DELETE", "/api/v1/labs/nlsv-mine?cleanup=true", token=token).status == 200
    assert not (home / ".clab" / "nlsv-mine").exists()


def _files_of(user: str) -> list[Path]:
    """Everything in the user's ~/.clab."""
    return sorted((Path(pwd.getpwnam(user).pw_dir) / ".clab").rglob("*"))


def _post_large(server: Server, path: str, token: str, size: int) -> http.client.HTTPResponse:
    """A POST declaring a ``size``-byte body, its answer read after the first 64 KiB are sent (a server refusing
    it answers at once, without reading the rest)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.putrequest("POST", path)
    conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    conn.send(b'{"topologyContent": {"name": "big", "topology": {"x": "' + b"y" * 65536)
    return conn.getresponse()


@pytest.mark.parametrize("name", ["..", "a/b", "a\x00b", "-" * 65, "x;reboot"])
def test_bad_lab_names(server, name):
    token = server.login(f"{PREFIX}-alice")
    before = _files_of(f"{PREFIX}-alice")
    quoted = urllib.request.quote(name, safe="")
    got = server.call("GET", f"/api/v1/labs/{quoted}", token=token)
    assert got.status in (400, 404) and "error" in got.text, got.text
    made = server.call("POST", "/api/v1/labs", {"topologyContent": {"name": name, "topology": {"nodes": {"a": {}}}}}, token)
    assert made.status == 400 and "Invalid characters" in made.text
    assert _files_of(f"{PREFIX}-alice") == before


def test_hostile_bodies_change_nothing(server):
    """A 10 MB topology (413), a bind of /etc/shadow by an ordinary user (403), a topology nestlab refuses (400):
    nothing deployed, no file left in ~/.clab."""
    token = server.login(f"{PREFIX}-alice")
    before = _files_of(f"{PREFIX}-alice")
    got = _post_large(server, "/api/v1/labs", token, 10_000_000)
    assert got.status == 413 and b"limit" in got.read()
    shadow = {"name": "shadow", "topology": {"nodes": {"a": {"kind": "linux", "binds": ["/etc/shadow:/tmp/s:ro"]}}}}
    got = server.call("POST", "/api/v1/labs", {"topologyContent": shadow}, token)
    assert got.status == 403 and "/etc/shadow" in got.text, got.text
    vendor = {"name": "vendor", "topology": {"nodes": {"a": {"kind": "nokia_srlinux"}}}}
    got = server.call("POST", "/api/v1/labs", {"topologyContent": vendor}, token)
    assert got.status == 400 and "nokia_srlinux" in got.text and "Traceback" not in got.text
    assert not {"big", "shadow", "vendor"} & set(server.call("GET", "/api/v1/labs", token=token).body)  # type: ignore[arg-type]
    assert _files_of(f"{PREFIX}-alice") == before


def test_forged_expired_revoked_and_orphaned_tokens(server):
    """Tokens signed with another key or none, expired, revoked (replayed after logout), and one whose user left
    the groups: each 401 with the reason."""
    user = f"{PREFIX}-alice"
    good = server.login(user)
    claims = jwt.decode(good, options={"verify_signature": False})
    forged = jwt.encode({**claims, "sub": f"{PREFIX}-admin"}, "guessed-secret", algorithm="HS256")
    unsigned = jwt.encode({**claims, "sub": f"{PREFIX}-admin"}, None, algorithm="none")  # type: ignore[arg-type]
    for token in (forged, unsigned, good[:-4] + "AAAA"):
        got = server.call("GET", "/api/v1/labs", token=token)
        assert got.status == 401 and "invalid token" in got.text, got.text
    secret = (server.state / "jwt.secret").read_bytes()
    expired = jwt.encode({**claims, "exp": int(time.time()) - 5}, secret, algorithm="HS256")
    assert "expired" in server.call("GET", "/api/v1/labs", token=expired).text
    assert server.call("POST", "/logout", token=good).status == 200
    replayed = server.call("GET", "/api/v1/labs", token=good)
    assert replayed.status == 401 and "revoked" in replayed.text
    other = server.login(user)
    _run("gpasswd", "-d", user, "clab_api")
    try:
        left = server.call("GET", "/api/v1/labs", token=other)
        assert left.status == 401 and "may no longer sign in" in left.text
    finally:
        _run("gpasswd", "-a", user, "clab_api")
    assert server.call("GET", "/api/v1/labs", token=other).status == 200


def test_administrator_sees_and_acts_on_every_lab(server, labs):
    assert labs(f"{PREFIX}-bob", "nlsv-bobs", {"a": {"kind": "linux"}}).status == 200
    admin = server.login(f"{PREFIX}-admin")
    assert "nlsv-bobs" in server.call("GET", "/api/v1/labs", token=admin).body  # type: ignore[operator]
    assert server.call("GET", "/api/v1/users", token=admin).status == 200
    assert server.call("GET", "/api/v1/users", token=server.login(f"{PREFIX}-bob")).status == 403
    assert server.call("GET", "/api/v1/health/metrics", token=admin).status == 200
    assert server.call("POST", "/api/v1/users", {"username": "x", "password": "y"}, admin).status == 403
    assert server.call("DELETE", "/api/v1/labs/nlsv-bobs", token=admin).status == 200
    assert server.call("GET", "/api/v1/labs", token=server.login(f"{PREFIX}-bob")).body == {}


def test_tls_by_default_and_the_secret_survives(machine):
    """Without --no-tls the server makes a self-signed certificate (key 0600) and serves HTTPS; a token issued
    before a restart is valid after it (the secret is kept, 0600); --no-tls off loopback is refused."""
    venv, base = machine
    state = base / "tls-state"
    first = Server(venv, state)
    try:
        token = first.login(f"{PREFIX}-bob")
    finally:
        first.stop()
    assert (state / "key.pem").stat().st_mode & 0o777 == 0o600
    assert (state / "jwt.secret").stat().st_mode & 0o777 == 0o600
    second = Server(venv, state)
    try:
        assert second.call("GET", "/api/v1/version", token=token).status == 200
    finally:
        second.stop()
    refused = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "nestlab.cli.app",
            "serve",
            "--listen",
            "0.0.0.0:1",
            "--no-tls",
            "--state",
            str(state),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and "not loopback" in refused.stderr


def test_failed_logins_are_limited(machine):
    """Five wrong passwords for a name: the sixth try is 429 even with the right one; so for the address."""
    venv, base = machine
    limited = Server(venv, base / "limit-state", "--no-tls")
    try:
        for _ in range(5):
            assert limited.call("POST", "/login", {"username": f"{PREFIX}-bob", "password": "wrong"}).status == 401
        got = limited.call("POST", "/login", {"username": f"{PREFIX}-bob", "password": USERS[f"{PREFIX}-bob"][0]})
        assert got.status == 429 and "too many failed logins" in got.text
        other = limited.call("POST", "/login", {"username": f"{PREFIX}-alice", "password": USERS[f"{PREFIX}-alice"][0]})
        assert other.status == 429 and "address" in other.text
    finally:
        limited.stop()
