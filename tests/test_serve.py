"""`nestlab serve` (docs/serve.md): a real server on 127.0.0.1, real Linux users made here (PAM against passwords
set with chpasswd), labs deployed through the API running as their users, and hostile requests that must each get a
4xx with a reason and change nothing.  The server runs from a venv of Debian's Python (the suite's own may live
where the users cannot read) with nestlab and its ``serve`` extra installed from a copy of this checkout."""

from __future__ import annotations

import contextlib
import http.client
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import pytest
import websocket
import yaml
from serve_fixtures import PREFIX, USERS, Server

from nestlab.backends.kernel import procs
from nestlab.testbeds import apiserver

ROOT = Path(__file__).resolve().parent.parent
SLEEPER = "sleep 3{n}7.5"  # a node's cmd, found on the machine by its argument


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
    why = "a NUL character" if "\x00" in name else "Invalid characters"  # a NUL is refused in any value, first
    assert made.status == 400 and why in made.text, made.text
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


def test_tls_by_default_and_the_secret_survives(serve_machine):
    """Without --no-tls the server makes a self-signed certificate (key 0600) and serves HTTPS; a token issued
    before a restart is valid after it (the secret is kept, 0600); --no-tls off loopback is refused."""
    venv, base = serve_machine
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


def test_failed_logins_are_limited(serve_machine):
    """Five wrong passwords for a name: the sixth try is 429 even with the right one; so for the address."""
    venv, base = serve_machine
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


def _install(python: str, *args: str, user: str | None = None, env: dict[str, str] | None = None):
    """``nestlab serve --install ARGS`` run by ``python`` (as ``user``, root when None)."""
    command = [python, "-m", "nestlab.cli.app", "serve", "--install", *args]
    if user:
        command = ["runuser", "-u", user, "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/", env=env)


def test_install_sets_up_a_service_that_serves(serve_machine):
    """--install writes the unit (this nestlab's absolute interpreter, the options given, restarted on failure),
    makes the server's folder 0700 and the system groups clab_api and clab_admins, says what to do next; run
    again it changes nothing; the unit's command line serves."""
    venv, base = serve_machine
    root, python, port = base / "install-root", str(venv / "bin" / "python"), apiserver.free_port()
    state = base / "unit-state"
    args = ["--root", str(root), "--listen", f"127.0.0.1:{port}", "--no-tls", "--state", str(state)]
    got = _install(python, *args)
    assert got.returncode == 0, got.stderr
    assert "systemctl enable --now nestlab-serve" in got.stdout and "usermod -aG clab_api" in got.stdout
    unit = (root / "etc/systemd/system/nestlab-serve.service").read_text()
    start = re.search(r"^ExecStart=(.*)$", unit, re.M)
    assert start and start.group(1).startswith(f"{python} -m nestlab.cli.app serve --listen 127.0.0.1:{port} --state {state} ")
    assert "\nRestart=on-failure\n" in unit and "\nWantedBy=multi-user.target\n" in unit
    assert (root / state.relative_to("/")).stat().st_mode & 0o7777 == 0o700
    groups = (root / "etc/group").read_text()
    made = {line.split(":")[0]: int(line.split(":")[2]) for line in groups.splitlines()}
    assert made.keys() == {"clab_api", "clab_admins"} and max(made.values()) < 1000  # system groups
    assert _install(python, *args).returncode == 0 and (root / "etc/group").read_text() == groups
    served = subprocess.Popen(shlex.split(start.group(1)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as health:
                    assert health.status == 200
                    break
            time.sleep(0.2)
        else:
            pytest.fail("the unit's command line did not serve")
    finally:
        served.send_signal(signal.SIGINT)
        served.wait(20)


def test_install_refuses_a_user_and_a_closed_python(serve_machine):
    """--install is refused to an ordinary user, and to an interpreter others cannot run (here a link to one in a
    folder 0700): nothing written either time."""
    venv, base = serve_machine
    root = base / "refused-root"
    python = str(venv / "bin" / "python")
    got = _install(python, "--root", str(root), user=f"{PREFIX}-alice")
    assert got.returncode == 1 and "runs as the machine's root" in got.stderr
    closed = base / "closed"
    closed.mkdir(mode=0o700)
    (closed / "python").symlink_to(python)
    site = next(venv.glob("lib/python3*/site-packages"))
    got = _install(str(closed / "python"), "--root", str(root), env={"PYTHONPATH": str(site), "PATH": "/usr/sbin:/usr/bin"})
    assert got.returncode == 1 and f"{closed} is closed to other users" in got.stderr, got.stderr
    assert not root.exists()


LOAD_USERS = 20
LOAD_TIMEOUT = 240  # seconds any one answer may take


def _at_once(server: Server, method: str, path: str, body: object, tokens: list[str]) -> list[tuple[apiserver.Answer, float]]:
    """The request made by every token at the same moment (a thread each): each answer and its seconds."""

    def timed(token: str) -> tuple[apiserver.Answer, float]:
        started = time.monotonic()
        got = server.call(method, path, body, token, LOAD_TIMEOUT)
        return got, time.monotonic() - started

    with ThreadPoolExecutor(len(tokens)) as pool:
        return list(pool.map(timed, tokens))


def test_many_users_deploy_and_destroy_at_once(server):
    """LOAD_USERS users each deploy a lab of the same name at the same time, then destroy it at the same time:
    every answer 2xx within its timeout, each lab's node running as its own user in between, nothing of any of
    them left after (no node process, no lab listed, no file in ~/.clab)."""
    wanted = {f"{PREFIX}-l{i}": (f"L0ad-pass-{i}", ["clab_api"]) for i in range(LOAD_USERS)}
    cmd = SLEEPER.format(n=4)
    topology = {"name": "nlsv-load", "topology": {"nodes": {"a": {"kind": "linux", "cmd": cmd}}}}
    with apiserver.users(wanted):
        tokens = {user: server.login(user, password) for user, (password, _groups) in wanted.items()}
        started = time.monotonic()
        deployed = _at_once(server, "POST", "/api/v1/labs", {"topologyContent": topology}, list(tokens.values()))
        deploying = time.monotonic() - started
        assert [a.status for a, _ in deployed] == [200] * LOAD_USERS, [a.text for a, _ in deployed if a.status != 200]
        uids = sorted(pwd.getpwnam(user).pw_uid for user in wanted)
        assert sorted(_sleepers(cmd.split()[1]).values()) == uids
        started = time.monotonic()
        destroyed = _at_once(server, "DELETE", "/api/v1/labs/nlsv-load?cleanup=true", None, list(tokens.values()))
        destroying = time.monotonic() - started
        assert [a.status for a, _ in destroyed] == [200] * LOAD_USERS, [a.text for a, _ in destroyed if a.status != 200]
        assert not _sleepers(cmd.split()[1])
        for user, token in tokens.items():
            assert server.call("GET", "/api/v1/labs", token=token).body == {}
            assert _files_of(user) == []
        slowest = max(seconds for _, seconds in deployed + destroyed)
        print(f"{LOAD_USERS} users: deploy {deploying:.1f} s, destroy {destroying:.1f} s, slowest answer {slowest:.1f} s")


def _post_raw(server: Server, path: str, token: str, body: bytes) -> apiserver.Answer:
    request = urllib.request.Request(server.url + path, data=body, method="POST")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as got:
            return apiserver.Answer(got.status, None, got.read().decode())
    except urllib.error.HTTPError as exc:
        return apiserver.Answer(exc.code, None, exc.read().decode())


def test_nul_anywhere_and_deep_json_are_400(server, labs):
    """A NUL in a command, a bind's path, a YAML topology (its "\\0" escape), a netem value, a login name or a
    node in a path, and JSON nested deeper than the parser goes: each 400 with the reason, nothing run, nothing
    made, never an internal error."""
    user = f"{PREFIX}-alice"
    assert (
        labs(user, "nlsv-nul", {"a": {"kind": "linux"}, "b": {"kind": "linux"}}, [{"endpoints": ["a:eth1", "b:eth1"]}]).status
        == 200
    )
    token = server.login(user)
    before = _files_of(user)
    node = "/api/v1/labs/nlsv-nul/nodes/clab-nlsv-nul-a"
    bind = {"name": "nlsv-nul2", "topology": {"nodes": {"a": {"kind": "linux", "binds": ["/tmp/x\x00y:/x"]}}}}
    escaped = 'name: nlsv-nul3\ntopology: {nodes: {a: {kind: linux, cmd: "sleep 9\\0"}}}\n'
    for method, path, body in [
        ("POST", "/api/v1/labs/nlsv-nul/exec", {"command": "touch /tmp/nlsv-nul-ran\x00x"}),
        ("POST", "/api/v1/labs", {"topologyContent": bind}),
        ("POST", "/api/v1/labs", {"topologyContent": escaped}),
        ("PUT", node + "/interfaces/eth1/netem", {"delay": "10ms\x00"}),
        ("POST", "/login", {"username": f"{user}\x00x", "password": USERS[user][0]}),
    ]:
        got = server.call(method, path, body, token)
        assert got.status == 400 and "NUL character" in got.text, (path, got.text)
    got = server.call("GET", "/api/v1/labs/nlsv-nul/nodes/a%00b/logs", token=token)
    assert got.status == 400 and "Invalid characters in node name" in got.text
    deep = _post_raw(server, "/api/v1/labs", token, b"[" * 200_000)
    assert deep.status == 400 and "not JSON" in deep.text, deep.text
    assert not Path("/tmp/nlsv-nul-ran").exists()
    assert set(server.call("GET", "/api/v1/labs", token=token).body) == {"nlsv-nul"}  # type: ignore[arg-type]
    assert _files_of(user) == before


def test_a_token_replayed_after_logout_changes_nothing(server, labs):
    """After logout the token destroys, deploys, runs and opens nothing (a terminal or the events are refused
    before the handshake, 401 with the reason); a node only another user's lab of the same name has is 404."""
    cmd = SLEEPER.format(n=5)
    alice, bob = f"{PREFIX}-alice", f"{PREFIX}-bob"
    assert labs(alice, "nlsv-replay", {"a": {"kind": "linux", "cmd": cmd}, "b": {"kind": "linux"}}).status == 200
    assert labs(bob, "nlsv-replay", {"a": {"kind": "linux"}}).status == 200
    token = server.login(alice)
    assert server.call("POST", "/logout", token=token).status == 200
    other = {"name": "nlsv-replay2", "topology": {"nodes": {"a": {"kind": "linux"}}}}
    for method, path, body in [
        ("DELETE", "/api/v1/labs/nlsv-replay", None),
        ("POST", "/api/v1/labs", {"topologyContent": other}),
        ("POST", "/api/v1/labs/nlsv-replay/exec", {"command": "touch /tmp/nlsv-replayed"}),
        ("POST", "/logout", None),
    ]:
        got = server.call(method, path, body, token)
        assert got.status == 401 and "revoked" in got.text, (path, got.text)
    ws = f"ws://127.0.0.1:{server.port}"
    for path in ("/api/v1/labs/nlsv-replay/nodes/a/terminal", "/api/v1/events"):
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            websocket.create_connection(f"{ws}{path}?token={token}", timeout=30)
        assert refused.value.status_code == 401 and b"revoked" in refused.value.resp_body
    bobs = server.login(bob)
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(f"{ws}/api/v1/labs/nlsv-replay/nodes/clab-nlsv-replay-b/terminal?token={bobs}", timeout=30)
    assert refused.value.status_code == 404 and b"not found" in refused.value.resp_body
    assert list(_sleepers(cmd.split()[1]).values()) == [pwd.getpwnam(alice).pw_uid]
    assert set(server.call("GET", "/api/v1/labs", token=server.login(alice)).body) == {"nlsv-replay"}  # type: ignore[arg-type]
    assert not Path("/tmp/nlsv-replayed").exists()


def test_a_second_deploy_is_409_and_leaves_the_labs_file(server, labs):
    """Deploying a name the caller already runs is 409, and the running lab's file in ~/.clab is as it was."""
    user = f"{PREFIX}-alice"
    assert labs(user, "nlsv-twice").status == 200
    file = Path(pwd.getpwnam(user).pw_dir) / ".clab" / "nlsv-twice" / "nlsv-twice.clab.yml"
    before = file.read_text()
    again = labs(user, "nlsv-twice", {"other": {"kind": "linux"}})
    assert again.status == 409, again.text
    assert file.read_text() == before
    assert not [p for p in file.parent.iterdir() if p.name.startswith(".")]  # nothing staged is left


def test_ssh_access_reaches_the_owners_node_only(server, labs):
    """A port is opened for the owner's node and a connection through it gets the node's SSH greeting; another user
    gets 404 for the lab, sees none of the sessions and cannot close one; closed, the port refuses connections."""
    alice, bob = f"{PREFIX}-alice", f"{PREFIX}-bob"
    assert labs(alice, "nlsv-ssh").status == 200
    mine, theirs = server.login(alice), server.login(bob)
    path = "/api/v1/labs/nlsv-ssh/nodes/clab-nlsv-ssh-a/ssh"
    assert server.call("POST", path, {"duration": "10m"}, theirs).status == 404
    assert server.call("POST", path, {"duration": "25h"}, mine).status == 400
    opened = server.call("POST", path, {"duration": "10m"}, mine)
    assert opened.status == 200, opened.text
    port = opened.body["port"]  # type: ignore[index]
    assert opened.body["command"] == f"ssh -p {port} root@127.0.0.1"  # type: ignore[index]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as through:
        assert through.makefile("rb").readline(256).startswith(b"SSH-2.0-")  # the node's sshd greets, through the port
    listed = server.call("GET", "/api/v1/ssh/sessions", token=mine).body
    assert [(s["port"], s["labName"], s["nodeName"]) for s in listed] == [(port, "nlsv-ssh", "clab-nlsv-ssh-a")]  # type: ignore[index,union-attr]
    assert server.call("GET", "/api/v1/ssh/sessions", token=theirs).body == []
    assert server.call("GET", "/api/v1/ssh/sessions?all=true", token=theirs).status == 403
    assert server.call("DELETE", f"/api/v1/ssh/sessions/{port}", token=theirs).status == 404
    assert server.call("DELETE", f"/api/v1/ssh/sessions/{port}", token=mine).status == 200
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10).close()


def test_generate_returns_writes_and_deploys_the_callers_own(server):
    """/generate: the YAML of a CLOS, a file of the caller's, a lab deployed as the caller (409 a second time,
    404 for another user); a kind that reads as an option is 400."""
    alice, bob = f"{PREFIX}-alice", f"{PREFIX}-bob"
    mine = server.login(alice)
    request = {"name": "nlsv-gen", "defaultKind": "linux", "nodePrefix": "n", "tiers": [{"count": 2}, {"count": 1}]}
    shown = server.call("POST", "/api/v1/generate", request, mine)
    assert shown.status == 200, shown.text
    assert set(yaml.safe_load(shown.body["topologyYaml"])["topology"]["nodes"]) == {"n1-1", "n1-2", "n2-1"}  # type: ignore[index]
    home = Path(pwd.getpwnam(alice).pw_dir)
    saved = server.call("POST", "/api/v1/generate", {**request, "outputFile": "gen/clos.yml"}, mine)
    assert saved.body["savedFilePath"] == str(home / "gen" / "clos.yml")  # type: ignore[index]
    assert (home / "gen" / "clos.yml").stat().st_uid == pwd.getpwnam(alice).pw_uid
    shutil.rmtree(home / "gen")
    try:
        deployed = server.call("POST", "/api/v1/generate", {**request, "deploy": True}, mine)
        assert deployed.status == 200, deployed.text
        assert len(deployed.body["deployOutput"]["nlsv-gen"]) == 3  # type: ignore[index]
        assert server.call("POST", "/api/v1/generate", {**request, "deploy": True}, mine).status == 409
        assert server.call("GET", "/api/v1/labs/nlsv-gen", token=server.login(bob)).status == 404
    finally:
        server.call("DELETE", "/api/v1/labs/nlsv-gen?cleanup=true", token=mine)
    bad = server.call("POST", "/api/v1/generate", {**request, "tiers": [{"count": 1, "kind": "--help"}]}, mine)
    assert bad.status == 400, bad.text
