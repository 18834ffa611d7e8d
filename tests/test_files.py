"""The file and lock helpers root uses where another user may write (backends/kernel/files.py, locks.py), with the
kernel's openat2 and with the per-component walk that stands in for it where the kernel has none."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nestlab.backends.kernel import files, locks
from nestlab.model import files as model_files

NOBODY = 65534
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "walk":
        monkeypatch.setattr(files, "_have_openat2", False)
    return request.param


@pytest.fixture
def world(tmp_path):
    """A sticky, world-writable folder (as /tmp) holding a folder of nobody's and one of root's."""
    os.chmod(tmp_path, 0o1777)
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    theirs.mkdir()
    mine.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    return tmp_path


def test_a_link_another_user_planted_is_refused_and_roots_own_is_followed(world, resolver):
    planted = world / "theirs" / "link"
    planted.symlink_to(world / "mine")
    os.lchown(planted, NOBODY, NOBODY)
    with pytest.raises(OSError) as refused:
        files.open_dir(planted / "sub", create=0o755)
    assert refused.value.errno == errno.ELOOP
    assert not (world / "mine" / "sub").exists()
    rooted = world / "mine" / "link"  # root's link in root's folder: as /var/run -> /run
    rooted.symlink_to(world / "mine")
    fd = files.open_dir(rooted)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(world / "mine"))
    finally:
        os.close(fd)
    # root's link, but in a folder nobody may change: refused too
    (world / "theirs" / "rootlink").symlink_to(world / "mine")
    with pytest.raises(OSError):
        files.open_dir(world / "theirs" / "rootlink")


def test_writing_replaces_a_planted_link_and_never_writes_through_it(world, resolver):
    target = world / "mine" / "roots-file"
    target.write_text("root's own\n")
    (world / "theirs" / "out").symlink_to(target)
    files.write(world / "theirs" / "out", "new\n", 0o640, owner=(NOBODY, NOBODY))
    written = world / "theirs" / "out"
    assert target.read_text() == "root's own\n"
    assert not written.is_symlink() and written.read_text() == "new\n"
    info = written.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (NOBODY, 0o640)
    assert [p.name for p in (world / "theirs").iterdir()] == ["out"]  # no temporary left


def test_removal_follows_no_link_at_the_top_nor_on_the_way(world, resolver):
    keep = world / "mine" / "lab"
    keep.mkdir()
    (keep / "file").write_text("kept\n")
    (world / "theirs" / "lab").symlink_to(keep)
    files.remove_tree(world / "theirs" / "lab")
    (world / "theirs" / "via").symlink_to(world / "mine")
    os.lchown(world / "theirs" / "via", NOBODY, NOBODY)
    files.remove_tree(world / "theirs" / "via" / "lab")
    assert (keep / "file").read_text() == "kept\n"
    gone = world / "theirs" / "real"
    (gone / "deep").mkdir(parents=True)
    (gone / "deep" / "out").symlink_to(keep)
    files.remove_tree(gone)
    assert not gone.exists() and (keep / "file").exists()


def test_a_lock_file_another_may_hold_is_replaced_not_waited_on(tmp_path):
    path = tmp_path / "x.lock"
    path.write_text("")
    path.chmod(0o644)  # as an older nestlab made it: anyone could open it and flock it
    theirs = os.open(path, os.O_RDONLY)
    fcntl.flock(theirs, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        fd = locks.lock_fd(str(path))
        try:
            locks.acquire(fd, wait=1)
            assert os.fstat(fd).st_mode & 0o777 == 0o600
        finally:
            os.close(fd)
    finally:
        os.close(theirs)
    link = tmp_path / "y.lock"
    link.symlink_to(tmp_path / "elsewhere")
    os.close(locks.lock_fd(str(link)))
    assert not link.is_symlink() and not (tmp_path / "elsewhere").exists()


INSIDE = """
import errno, sys
from nestlab.backends.kernel import files
try:
    files.open_dir(sys.argv[1], create=0o755)
except OSError as exc:
    print("refused" if exc.errno == errno.ELOOP else f"error {exc}")
else:
    print("followed")
"""


def test_in_a_user_namespace_a_strangers_link_is_not_trusted_as_roots(world):
    """Rootless, the machine's other users all show as the overflow uid (65534): a link a stranger (uid 4242, which
    the namespace does not map) planted in a sticky folder is theirs, never the running user's, and is refused."""
    planted = world / "planted"
    planted.symlink_to(world / "mine")
    os.lchown(planted, 4242, 4242)
    inside = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", INSIDE, str(planted / "sub")],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert inside.stdout.strip() == "refused", inside.stdout + inside.stderr
    assert not (world / "mine" / "sub").exists()


def test_a_file_root_reads_in_a_folder_another_may_write_is_regular_bounded_and_no_link(world):
    """What root reads where another user may write (a daemon's folder, a topology's folder): a link is refused
    unfollowed, a FIFO and a device at once, a file over the bound refused (model/files.py)."""
    theirs = world / "theirs"
    (theirs / "frr.conf").write_text("router ospf\n")
    os.mkfifo(theirs / "fifo")  # no writer: a plain open would wait for one
    (theirs / "zero").symlink_to("/dev/zero")
    (theirs / "big").write_bytes(b"x" * 2048)
    fd = os.open(theirs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert model_files.read_bytes("frr.conf", dir_fd=fd, follow=False) == b"router ospf\n"
        for name, why in (("zero", "symbolic link"), ("fifo", "a FIFO"), ("big", "larger than 1024")):
            with pytest.raises(OSError, match=why):
                model_files.read_bytes(name, 1024, dir_fd=fd, follow=False)
        with pytest.raises(OSError, match="a character device"):
            model_files.read_bytes(theirs / "zero")  # followed where asked, and still refused
    finally:
        os.close(fd)


def test_a_topology_fetched_from_a_web_server_is_bounded(monkeypatch):
    """A server that answers `-t https://...` with more than a topology may hold is refused (the answer read only up
    to the bound), not kept."""
    import http.server
    import threading

    from nestlab.cli.clab import topo
    from nestlab.errors import LabError

    class Endless(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            with contextlib.suppress(OSError):
                while True:  # a body without end, as /dev/zero would be
                    self.wfile.write(b"x" * 65536)

        def log_message(self, *args):
            pass

    monkeypatch.setattr(model_files, "MAX_BYTES", 1 << 20)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(LabError, match="larger than 1048576 bytes"):
            topo.fetched(f"http://127.0.0.1:{server.server_address[1]}/lab.clab.yml")
    finally:
        server.shutdown()
        server.server_close()


def test_the_live_pages_server_reads_a_request_body_only_up_to_its_bound():
    """Any user of the machine may connect to `nestlab observe`'s server (127.0.0.1): a POST announcing a body of
    gigabytes is answered 413 before any of it is read (even with the server's token)."""
    import http.client
    import threading
    from http.server import ThreadingHTTPServer

    from nestlab.observe import live

    handler = type("Probe", (live.Handler,), {"live": None, "token": "t"})  # the lab is never reached
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        conn.putrequest("POST", "/link")
        conn.putheader("X-Live-Token", "t")
        conn.putheader("Content-Length", str(1 << 33))
        conn.endheaders()
        conn.send(b"{")
        answer = conn.getresponse()
        assert answer.status == 413, answer.read()
        conn.close()
    finally:
        server.shutdown()
        server.server_close()


ASK = r"""
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
    print(200)
except urllib.error.HTTPError as exc:
    print(exc.code)
"""


def test_the_live_page_answers_only_its_token_on_loopback():
    """`nestlab graph --serve` listens on 127.0.0.1 and answers only requests carrying the token of the address it
    printed: another user of the machine (nobody) and a request without or with a wrong token get 403 for the page,
    the lab's graph, state and nodes, and a link change; a non-loopback address of the machine is not listened on."""
    import http.client
    import json
    import threading

    from nestlab.lab.lab import Lab
    from nestlab.observe import live

    server, url = live.listening(Lab.from_file(ROOT / "examples" / "twohosts.yml"), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port, token = server.server_address[1], url.split("?token=")[1]
        assert url == f"http://127.0.0.1:{port}/?token={token}" and len(token) >= 32

        def ask(method: str, path: str, token: str | None) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            body = json.dumps({"a": "c1:eth1", "b": "s1:eth1", "state": "down"}) if method == "POST" else None
            conn.request(method, path, body, {"X-Live-Token": token} if token is not None else {})
            code = conn.getresponse().status
            conn.close()
            return code

        assert ask("GET", f"/?token={token}", None) == 200
        assert ask("GET", "/graph.json", token) == 200
        for path in ("/", "/graph.json", "/state.json", "/node.json?name=c1"):
            assert ask("GET", path, None) == 403, path
            assert ask("GET", path, "x" * len(token)) == 403, path
            assert ask("GET", f"{path}{'&' if '?' in path else '?'}token=", None) == 403, path
        assert ask("POST", "/link", None) == 403
        as_nobody = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-c", ASK,
             f"http://127.0.0.1:{port}/state.json"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert as_nobody.stdout.strip() == "403", as_nobody.stderr
        addresses = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show", "scope", "global"], capture_output=True).stdout)
        for address in [a["local"] for link in addresses for a in link.get("addr_info", [])][:4]:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, port), timeout=5).close()
    finally:
        server.shutdown()
        server.server_close()
