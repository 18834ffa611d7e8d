"""Labs without root (docs/rootless.md), as an ordinary user really runs them: nobody (uid 65534) installs nestlab
in a venv of Debian's python with pip, deploys a shaped lab in its own namespaces, uses it, and destroys it; nothing
of nobody's is left running and the machine's namespaces, interfaces and labs are as they were.  What needs the
machine's root is refused up front, saying why."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, root_links, run_cli

from nestlab import names
from nestlab.backends.kernel import libc, procs, userns

NOBODY = 65534
STRANGER = 65533  # a second ordinary user, without even a passwd entry
PYTHON = "/usr/bin/python3"  # Debian's: the suite's own interpreter may live where nobody cannot read (/root)
SHAPED = """name: {name}
topology:
  nodes:
    h1: {{}}
    h2: {{}}
    s1: {{kind: bridge}}
  links:
    - endpoints: ["h1:eth1", "s1:p1"]
      ipv4: ["10.0.0.1/24", null]
      params: {{rate: 10mbit}}
    - endpoints: ["h2:eth1", "s1:p2"]
      ipv4: ["10.0.0.2/24", null]
"""

pytestmark = pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason=f"needs Debian's {PYTHON}")


def as_user(uid: int) -> list[str]:
    """The command line prefix that runs a command as ``uid``, with no groups and no capabilities."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


class User:
    """An ordinary user running nestlab as pip installed it in ``venv``, from a home folder of its own."""

    def __init__(self, uid: int, home: Path, venv: Path, installed: str = ""):
        self.uid = uid
        self.home = home
        self.venv = venv
        self.installed = installed  # what pip said installing it

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "LANG", "LC_")) or k.endswith("_CA_BUNDLE")}
        return {**keep, "PATH": f"{self.venv}/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.home)}

    def command(self, *args: str) -> list[str]:
        return [*as_user(self.uid), str(self.venv / "bin" / "nestlab"), *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), capture_output=True, text=True, env=self.env(), cwd=self.home, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen:
        """The command started, not waited for (its output piped)."""
        return subprocess.Popen(
            self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env(), cwd=self.home
        )

    def write(self, name: str, text: str) -> Path:
        path = self.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for made in [path, *path.relative_to(self.home).parents]:
            os.chown(self.home / made, self.uid, self.uid)
        return path

    def holder_folder(self) -> Path:
        return self.home / ".local" / "state" / "nestlab"


@pytest.fixture(scope="session")
def nobody():
    """A venv nobody made with Debian's python and nestlab pip-installed in it from a copy of this checkout (made
    once per session: about 15 s), in a folder of nobody's own under /tmp; removed, with nobody's processes, after."""
    base = Path(tempfile.mkdtemp(prefix="nestlab-rootless-", dir="/tmp"))
    base.chmod(0o755)
    try:
        mine = base / "nobody"
        (mine / "src").mkdir(parents=True)
        (mine / "home").mkdir()
        _copy_checkout(mine / "src")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(mine)], check=True)
        who = User(NOBODY, mine / "home", mine / "venv")
        install = f"{PYTHON} -m venv {who.venv} && {who.venv}/bin/pip install -v {mine / 'src'}"
        done = subprocess.run([*as_user(NOBODY), "sh", "-c", install], capture_output=True, text=True, env=who.env(), timeout=900)
        assert done.returncode == 0, f"nobody's pip install failed: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        who.installed = done.stdout + done.stderr
        yield who
    finally:
        _end_processes(NOBODY)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def stranger(nobody):
    """A second ordinary user (uid 65533, in no passwd file) with a home folder of its own, running the nestlab
    nobody installed (its venv is readable by all, as a venv on a shared machine may be)."""
    base = Path(tempfile.mkdtemp(prefix="nestlab-rootless-", dir="/tmp"))
    base.chmod(0o755)
    try:
        (base / "home").mkdir()
        os.chown(base / "home", STRANGER, STRANGER)
        yield User(STRANGER, base / "home", nobody.venv)
    finally:
        _end_processes(STRANGER)
        shutil.rmtree(base, ignore_errors=True)


def _copy_checkout(into: Path) -> None:
    """This checkout's files as git knows them (tracked and new, not ignored), as they are in the working tree."""
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / rel)


def _rootless(uid: int = NOBODY) -> list[int]:
    """Live processes of ``uid`` in a user namespace other than the machine's: its holder, its labs' processes."""
    machine = procs.namespace(os.getpid(), "user")
    return [
        pid for pid in procs.of_uid(uid) if procs.uids(pid) == (uid, uid) and procs.namespace(pid, "user") not in (machine, None)
    ]


def _end_processes(uid: int) -> None:
    """End ``uid``'s rootless processes and its uplink (slirp4netns, outside its namespaces)."""
    for pid in _rootless(uid) + [pid for pid in procs.of_uid(uid) if procs.comm(pid) == "slirp4netns"]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def _uplinks(uid: int = NOBODY) -> list[int]:
    """``uid``'s slirp4netns processes (outside its namespaces)."""
    return [pid for pid in procs.of_uid(uid) if procs.comm(pid) == "slirp4netns" and procs.alive(pid)]


def _gone(uid: int = NOBODY, timeout: float = 20.0) -> list[int]:
    """``uid``'s rootless processes still alive after up to ``timeout`` seconds (zombies do not count)."""
    deadline = time.monotonic() + timeout
    while (left := _rootless(uid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _machine() -> tuple[set[str], set[str], set[str]]:
    """What the machine's own lab world holds: /run/netns, /run/nestlab and its interfaces."""

    def listing(path: str) -> set[str]:
        return set(os.listdir(path)) if os.path.isdir(path) else set()

    return listing(names.NETNS_DIR), listing(names.STATE_ROOT), root_links()


def _iperf3_mbps(nobody: User, lab: str) -> float:
    """TCP from h1 to h2 for 3 s, as nobody (the server takes one client and ends)."""
    assert nobody.run("exec", "--lab", lab, "h2", "--", "iperf3", "-s", "-1", "-D").returncode == 0
    for _attempt in range(10):  # the daemon may not be listening yet
        client = nobody.run("exec", "--lab", lab, "h1", "--", "iperf3", "-c", "10.0.0.2", "-t", "3", "-J")
        if client.returncode == 0:
            return json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
        time.sleep(0.3)
    raise AssertionError(f"iperf3 never connected: {client.stdout[-1000:]}{client.stderr[-1000:]}")


@pytest.mark.throughput
def test_an_ordinary_users_shaped_lab_works_and_leaves_nothing(nobody):
    lab = "rl" + uuid.uuid4().hex[:6]
    before = _machine()
    topo = nobody.write("shaped.yml", SHAPED.format(name=lab))
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        holders = [pid for pid in _rootless() if procs.cmdline(pid).startswith(b"nestlab-holder\0")]
        assert len(holders) == 1, "one holder process keeps nobody's namespaces"
        assert not {e for e in os.listdir(names.NETNS_DIR) if lab in e}, "the lab's namespaces are nobody's, not the machine's"
        assert not os.path.exists(names.lab_dir(lab))
        ping = nobody.run("exec", "--lab", lab, "h1", "--", "ping", "-c", "2", "-W", "2", "10.0.0.2")
        assert ping.returncode == 0 and "2 received" in ping.stdout, ping.stdout + ping.stderr
        mbps = _iperf3_mbps(nobody, lab)
        assert 8 <= mbps <= 11, f"{mbps:.2f} Mbit/s through a link shaped to 10 Mbit/s"
        inspected = nobody.run("inspect", "--lab", lab, "--format", "json")
        assert inspected.returncode == 0, inspected.stderr
        nodes = {n["name"]: n for n in json.loads(inspected.stdout)["nodes"]}
        assert set(nodes) == {"h1", "h2", "s1"}
        assert [i["addresses"] for i in nodes["h1"]["interfaces"] if i["name"] == "eth1"] == [["10.0.0.1/24"]]
        assert lab in nobody.run("inspect", "--all").stdout
        destroyed = nobody.run("destroy", "--lab", lab)
        assert destroyed.returncode == 0, destroyed.stderr
        assert _gone() == [], "nothing of nobody's runs once its last lab is gone"
        assert not (nobody.holder_folder() / "holder.pid").exists()
        assert _machine() == before, "the machine's /run/netns, /run/nestlab and interfaces are as they were"
    finally:
        nobody.run("destroy", "--lab", lab)
        _end_processes(NOBODY)


def test_what_needs_the_machines_root_is_refused_with_its_reason(nobody):
    lab = "rl" + uuid.uuid4().hex[:6]
    macvlan = nobody.write(
        "macvlan.yml",
        f"name: {lab}\nallow_host_interfaces: true\ntopology:\n  nodes: {{x: {{}}}}\n  links:\n"
        '    - endpoints: ["x:e1"]\n      mode: macvlan\n      parent: nlhost0\n',
    )
    refused = nobody.run("deploy", "-t", str(macvlan))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "error rootless mode cannot make x:e1 (mode macvlan on this machine's own network, interface nlhost0): "
        "the machine's root can (run it with sudo)"
    ]
    logins = nobody.write(
        "cred.clab.yml",
        f"name: {lab}\ntopology:\n  nodes:\n    r1: {{kind: linux, credentials: {{username: admin, password: lab-Secret1}}}}\n",
    )
    refused = nobody.run("deploy", "-t", str(logins))
    assert (
        refused.returncode == 1
        and "cannot make r1 (password logins (credentials:): rootless mode offers logins by key" in refused.stderr
    )
    nobody.write("motd", "hello\n")
    rooted = nobody.write(
        "rooted.yml", f"name: {lab}\ntopology:\n  nodes:\n    w: {{binds: ['motd:/etc/nestlab-nowhere/motd']}}\n"
    )
    refused = nobody.run("deploy", "-t", str(rooted))
    assert refused.returncode == 1 and "cannot make w (a root of the node's own" in refused.stderr, refused.stderr
    assert lab not in nobody.run("inspect", "--all").stdout
    limited = nobody.write(
        "limited.yml", f"name: {lab}\ntopology:\n  nodes:\n    a: {{resources: {{memory: 64m}}}}\n    b: {{}}\n"
    )
    try:
        deployed = nobody.run("deploy", "-t", str(limited))
        assert deployed.returncode == 0, deployed.stderr
        assert "note cgroup limits not applied: rootless (a)" in deployed.stderr.splitlines()
    finally:
        assert nobody.run("destroy", "--lab", lab).returncode == 0
    assert _gone() == []


def test_an_ordinary_user_sees_only_its_own_labs(nobody, topo_file, lab_name):
    assert run_cli("deploy", "-t", str(topo_file(SHAPED.format(name="{name}"))), check=True).returncode == 0
    assert lab_name not in nobody.run("inspect", "--all").stdout
    destroyed = nobody.run("destroy", "--lab", lab_name)
    assert destroyed.stderr.strip() == f"lab {lab_name}: nothing to remove", "nobody's view holds no lab of that name"
    assert os.path.isdir(names.lab_dir(lab_name)) and os.path.exists(names.netns_path(lab_name, "h1")), "root's lab runs on"
    assert _gone() == []
    assert run_cli("destroy", "--lab", lab_name).returncode == 0


def test_doctor_says_whether_rootless_mode_works_here(nobody):
    as_root = {row["name"]: row for row in json.loads(run_cli("doctor", "--format", "json", check=True).stdout)}
    assert as_root["rootless"]["ok"], as_root["rootless"]
    assert "an ordinary user may make its own namespaces" in as_root["rootless"]["detail"]
    inside = {row["name"]: row for row in json.loads(nobody.run("doctor", "--format", "json").stdout)}
    assert inside["rootless"]["ok"] and inside["rootless"]["detail"].startswith("in use")
    assert not inside["cgroup-v2"]["ok"] and inside["cgroup-v2"]["detail"] == "not applied in rootless mode"
    if shutil.which("vtysh"):
        assert inside["frr"]["detail"] == "Debian's FRR, its daemons root in your namespace (rootless)"
    assert _gone() == []


SUBIDS = range(1_500_000_000, 1_500_000_000 + 65536)  # nobody's subordinate ids while a test gives it some
CLAB = """name: {name}
topology:
  nodes:
    n1: {{kind: linux}}
    n2: {{kind: linux}}
  links:
    - endpoints: ["n1:eth1", "n2:eth1"]
"""


@pytest.fixture
def subordinate_ids():
    """nobody given subordinate ids in /etc/subuid and /etc/subgid, as an administrator gives them once
    (docs/rootless.md); the files put back as they were after the test."""
    assert shutil.which("newuidmap") and shutil.which("newgidmap"), "uidmap is installed by make deps"
    kept: dict[str, str | None] = {}
    try:
        for path in (userns.SUBUID, userns.SUBGID):
            kept[path] = Path(path).read_text() if os.path.exists(path) else None
            text = kept[path] or ""
            _replace(path, text + ("\n" if text and not text.endswith("\n") else "") + f"nobody:{SUBIDS.start}:{len(SUBIDS)}\n")
        yield SUBIDS
    finally:
        for pid in _of_subordinate_ids():  # daemons a failed test left running as one of them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for path, text in kept.items():
            if text is None:
                os.unlink(path)
            else:
                _replace(path, text)


def _replace(path: str, text: str) -> None:
    """``path`` holding ``text``, swapped in whole (a reader never sees it half written), readable by all."""
    Path(path + ".nestlab-test").write_text(text)
    os.chmod(path + ".nestlab-test", 0o644)
    os.replace(path + ".nestlab-test", path)


def _of_subordinate_ids() -> list[int]:
    """Live processes running as one of nobody's subordinate ids (sshd's and FRR's users inside its namespace)."""
    return [pid for pid in procs.others() if (ids := procs.uids(pid)) and ids[0] in SUBIDS and procs.alive(pid)]


def test_with_subordinate_ids_a_containerlab_node_answers_nestlab_ssh_and_the_users_ssh(
    nobody, subordinate_ids, topo_file, lab_name
):
    lab = lab_name
    before = _machine()
    topo = nobody.write("two.clab.yml", CLAB.format(name=lab))
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        said = nobody.run("ssh", "--lab", lab, "n1", "--", "hostname")
        assert said.returncode == 0 and said.stdout.strip() == "n1", said.stdout + said.stderr
        hosts = nobody.run("exec", "--lab", lab, "n2", "--", "getent", "ahostsv4", f"clab-{lab}-n1")
        assert hosts.stdout.split()[:1] == ["172.20.20.2"], "names in the view's /etc/hosts: " + hosts.stdout + hosts.stderr
        own = _own_ssh(nobody, lab, "n2", "hostname")
        assert own.stdout.strip() == "n2", "nobody's own ssh, through nestlab ssh --stdio: " + own.stdout + own.stderr
        # root's lab of the same name comes and goes beside it, leaving nobody's (and its SSH gate) alone
        assert run_cli("deploy", "-t", str(topo_file("name: {name}\ntopology:\n  nodes:\n    x: {}\n"))).returncode == 0
        assert run_cli("destroy", "--lab", lab).returncode == 0
        again = nobody.run("ssh", "--lab", lab, "n1", "--", "hostname")
        assert again.stdout.strip() == "n1", "root's destroy of its own lab of that name: " + again.stdout + again.stderr
        doctor = {row["name"]: row for row in json.loads(nobody.run("doctor", "--format", "json").stdout)}
        assert "your subordinate ids are mapped too" in doctor["rootless"]["detail"], doctor["rootless"]
        with open("/etc/hosts") as fh:
            assert lab not in fh.read(), "the machine's /etc/hosts is untouched"
        assert nobody.run("destroy", "--lab", lab).returncode == 0
        assert (
            list((nobody.home / ".ssh" / "config.d").iterdir()) == [] and list((nobody.home / ".ssh" / "nestlab").iterdir()) == []
        ), "the lab's ssh config and key go with it"
        assert _gone() == [] and _of_subordinate_ids() == []
        assert _machine() == before
    finally:
        nobody.run("destroy", "--lab", lab)
        _end_processes(NOBODY)


STUDENTS = CLAB.replace(
    "n2: {{kind: linux}}", "n2: {{kind: linux, credentials: {{username: student, identity-file: student_key}}}}"
)
STUDENTS_BOTH = CLAB.replace(
    "  nodes:", "  defaults:\n    credentials: {{username: student, identity-file: student_key}}\n  nodes:"
)


def test_with_subordinate_ids_key_logins_on_two_nodes_are_two_of_the_users_own_ids(nobody, subordinate_ids, lab_name):
    """Rootless, a login's uid is one the user's namespace maps (the upper half of its subordinate ids): student
    logs in with its key on n1 and on n2 through nobody's own ssh as two uids, each one of nobody's subordinate ids
    outside; the one on n1 gets EPERM from ``kill -0`` of the one on n2's process and cannot read its environment,
    which n2's own login reads; nothing of either outlives the destroy."""
    lab = lab_name
    topo = nobody.write("students.clab.yml", STUDENTS_BOTH.format(name=lab))
    key = nobody.home / "student_key"
    subprocess.run(
        [*as_user(NOBODY), "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, env=nobody.env()
    )
    secret = "nestlab-env-" + os.urandom(4).hex()
    pids: dict[str, int] = {}
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        uids = {}
        for node in ("n1", "n2"):
            left = _own_ssh(nobody, lab, node, f"id -u; NESTLAB_SECRET={secret} nohup sleep 300 >/dev/null 2>&1 & echo $!")
            assert len(left.stdout.split()) == 2, left.stdout + left.stderr
            uids[node], pids[node] = map(int, left.stdout.split())
        assert uids["n1"] != uids["n2"] and 0 not in uids.values(), uids
        outside = {node: procs.uids(pid) for node, pid in pids.items()}
        assert all(ids and ids[0] in SUBIDS for ids in outside.values()), outside  # the user's own ids, no one else's
        reach = f"kill -0 {pids['n2']}; echo kill=$?; cat /proc/{pids['n2']}/environ; echo environ=$?"
        own = _own_ssh(nobody, lab, "n2", reach)
        assert "kill=0" in own.stdout and secret in own.stdout, own.stdout + own.stderr
        other = _own_ssh(nobody, lab, "n1", reach)
        assert "kill=1" in other.stdout and "Operation not permitted" in other.stderr, other.stdout + other.stderr
        assert "environ=1" in other.stdout and secret not in other.stdout, other.stdout + other.stderr
        assert nobody.run("destroy", "--lab", lab).returncode == 0
        assert [pid for pid in pids.values() if procs.alive(pid)] == [], "a login's processes outlived its lab"
    finally:
        nobody.run("destroy", "--lab", lab)
        _end_processes(NOBODY)


def test_without_subordinate_ids_nestlab_ssh_reaches_a_containerlab_node_and_ssh_says_why_not(nobody, lab_name):
    """Most users of a shared machine have no /etc/subuid range: no SSH server can run in a namespace of one user
    (sshd and dropbear set the session's groups), so `nestlab ssh` enters the node itself, and the user's own ssh
    through the lab's ssh config is told why and what to do, never a bare reset, a node with a key login
    (``credentials: {username}``, which has no uid to run as there) too; nothing of nobody's lasts 3 s past the
    destroy."""
    assert userns.subordinate(userns.SUBUID, NOBODY, "nobody") is None, "this test needs nobody without subordinate ids"
    lab = lab_name
    topo = nobody.write("two.clab.yml", STUDENTS.format(name=lab))
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        said = nobody.run("ssh", "--lab", lab, "n1", "--", "hostname", "&&", "id", "-u")
        assert said.returncode == 0 and said.stdout.split() == ["n1", "0"], said.stdout + said.stderr
        for node in ("n1", "n2"):
            own = _own_ssh(nobody, lab, node, "hostname")
            assert own.returncode == 255 and "give your user subordinate ids in /etc/subuid" in own.stderr, own.stderr
            assert "Connection reset" not in own.stderr
        destroyed = nobody.run("destroy", "--lab", lab)
        assert destroyed.returncode == 0, destroyed.stderr
        deadline = time.monotonic() + 3
        while (left := _rootless() + _uplinks()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == [], "nothing of nobody's runs 3 s after its last lab is gone"
    finally:
        nobody.run("destroy", "--lab", lab)
        _end_processes(NOBODY)


def test_with_subordinate_ids_frr_routers_reach_ospf_full(nobody, subordinate_ids):
    (nobody.home / "frr-ospf").mkdir(exist_ok=True)
    for conf in (ROOT / "examples" / "frr-ospf").iterdir():
        nobody.write(f"frr-ospf/{conf.name}", conf.read_text())
    topo = nobody.write("frr-ospf.yml", (ROOT / "examples" / "frr-ospf.yml").read_text())
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        deadline, full = time.monotonic() + 90, 0
        while time.monotonic() < deadline and full < 2:
            said = nobody.run("exec", "--lab", "frr-ospf", "r1", "--", "vtysh", "-c", "show ip ospf neighbor json").stdout
            full = sum(
                n["nbrState"].startswith("Full") for ns in json.loads(said or "{}").get("neighbors", {}).values() for n in ns
            )
            time.sleep(1)
        assert full == 2, said
        assert any(procs.comm(pid) == "ospfd" for pid in _of_subordinate_ids()), "ospfd runs as frr, a subordinate id"
        deadline = time.monotonic() + 30  # Full first, then SPF puts the routes in
        while (
            "1 received"
            not in (ping := nobody.run("exec", "--lab", "frr-ospf", "h1", "--", "ping", "-c1", "-W1", "10.3.3.10")).stdout
        ):
            assert time.monotonic() < deadline, ping.stdout + ping.stderr
        assert nobody.run("destroy", "--lab", "frr-ospf").returncode == 0
        assert _gone() == [] and _of_subordinate_ids() == []
    finally:
        nobody.run("destroy", "--lab", "frr-ospf")
        _end_processes(NOBODY)


def _listening(address: str) -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind((address, 0))
    server.listen(4)
    server.settimeout(15)
    return server, server.getsockname()[1]


def _answer(server: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn, _ = server.accept()
        conn.sendall(b"reached\n")
        conn.close()


def _tcp_from(nobody: User, lab: str, node: str, address: str, port: int) -> subprocess.CompletedProcess:
    script = f"exec 3<>/dev/tcp/{address}/{port} && cat <&3"
    return nobody.run("exec", "--lab", lab, node, "--", "timeout", "5", "bash", "-c", script)


def test_nodes_reach_the_machine_through_slirp4netns_but_not_its_loopback(nobody):
    """The management network's NAT leads out of the user's namespace through slirp4netns: a node reaches this
    machine's own address (a server of the test's there answers it), never the machine's loopback (its
    services are not the lab's), and slirp4netns ends with the user's last lab."""
    own = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True).stdout.split()
    address = next((word.split("/")[0] for before, word in zip(own, own[1:]) if before == "inet"), None)
    assert address, "the machine has an IPv4 address of its own"
    lab = "rl" + uuid.uuid4().hex[:6]
    topo = nobody.write("out.clab.yml", CLAB.format(name=lab))
    outer, port = _listening(address)
    inner, inner_port = _listening("127.0.0.1")
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        uplinks = [pid for pid in procs.of_uid(NOBODY) if procs.comm(pid) == "slirp4netns"]
        assert len(uplinks) == 1, "one uplink per user"
        waiter = threading.Thread(target=_answer, args=(outer,))
        waiter.start()
        out = _tcp_from(nobody, lab, "n1", address, port)
        waiter.join(timeout=10)
        assert out.stdout.strip() == "reached", out.stdout + out.stderr
        threading.Thread(target=_answer, args=(inner,), daemon=True).start()
        loopback = _tcp_from(nobody, lab, "n1", "10.0.2.2", inner_port)
        assert loopback.returncode != 0 and "reached" not in loopback.stdout, loopback.stdout
        assert nobody.run("destroy", "--lab", lab).returncode == 0
        assert _gone() == []
        deadline = time.monotonic() + 10
        while any(procs.alive(pid) for pid in uplinks) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(procs.alive(pid) for pid in uplinks), "slirp4netns ends with the holder"
    finally:
        outer.close()
        inner.close()
        nobody.run("destroy", "--lab", lab)
        _end_processes(NOBODY)


KATHARA = {
    "lab.conf": 'pc1[0]="A"\npc3[0]="A"\nr1[0]="A"\nr1[1]="B"\nr1[image]="kathara/frr"\npc2[0]="B"\npc2[image]="kathara/base"\n',
    "pc1.startup": "ip address add 10.1.0.10/24 dev eth0\nip route add default via 10.1.0.1\n",
    "pc3.startup": "ip address add 10.1.0.30/24 dev eth0\n",
    "r1.startup": "ip address add 10.1.0.1/24 dev eth0\nip address add 10.2.0.1/24 dev eth1\nsystemctl start frr\n",
    "r1/etc/frr/frr.conf": "hostname r1\nip route 10.9.0.0/24 10.2.0.10\n",
    "pc2.startup": "ip address add 10.2.0.10/24 dev eth0\nip route add default via 10.2.0.1\n",
    "pc1/tmp/hello.txt": "from pc1's folder\n",
}


@pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")
def test_an_ordinary_users_kathara_lab_starts_answers_and_is_cleaned(nobody):
    """Kathará's commands on a Kathará lab as nobody: a collision domain of three (a bridge) and one of two (a veth
    pair) through an FRR router, each device's startup and folder; lclean leaves nothing of nobody's."""
    lab = "kl" + uuid.uuid4().hex[:6]
    before = _machine()
    for rel, text in KATHARA.items():
        nobody.write(f"{lab}/{rel}", text)
    folder = str(nobody.home / lab)
    started = nobody.run("kathara", "lstart", "-d", folder, "--noterminals")
    try:
        assert started.returncode == 0, started.stderr
        deadline, ping = time.monotonic() + 20, None
        while time.monotonic() < deadline and (ping is None or "1 received" not in ping.stdout):
            ping = nobody.run("kathara", "exec", "-d", folder, "pc1", "--", "ping", "-c1", "-W1", "10.2.0.10")
        assert "1 received" in ping.stdout, ping.stdout + ping.stderr
        routes = nobody.run("kathara", "exec", "-d", folder, "r1", "--", "vtysh", "-c", "show ip route static")
        assert "10.9.0.0/24 [1/0] via 10.2.0.10" in routes.stdout, routes.stdout + routes.stderr
        hello = nobody.run("kathara", "exec", "-d", folder, "pc1", "--", "cat", "/tmp/hello.txt")
        assert hello.stdout == "from pc1's folder\n", hello.stderr
        listed = nobody.run("kathara", "list", "-d", folder).stdout
        assert all(device in listed for device in ("pc1", "pc2", "pc3", "r1")), listed
    finally:
        cleaned = nobody.run("kathara", "lclean", "-d", folder)
    assert cleaned.returncode == 0 and cleaned.stderr.startswith(f"lab {lab}: removed "), cleaned.stderr
    assert _gone() == [], "nothing of nobody's runs once its Kathará lab is cleaned"
    assert _machine() == before


def _h1_addresses(inspected: subprocess.CompletedProcess) -> list[list[str]]:
    assert inspected.returncode == 0, inspected.stderr
    nodes = {n["name"]: n for n in json.loads(inspected.stdout)["nodes"]}
    return [i["addresses"] for i in nodes["h1"]["interfaces"] if i["name"] == "eth1"]


def test_two_users_and_root_run_labs_of_one_name_at_once(nobody, stranger, topo_file, lab_name):
    """nobody, a uid without a passwd entry and root deploy a lab of one name at the same moment, each its own
    addresses: each sees and removes only its own, and nothing of either user's runs after."""
    users = {nobody: 1, stranger: 2}
    own = {user: SHAPED.format(name=lab_name).replace("10.0.0.", f"10.{net}.0.") for user, net in users.items()}
    deploying = {user: user.start("deploy", "-t", str(user.write("same.yml", text))) for user, text in own.items()}
    try:
        assert run_cli("deploy", "-t", str(topo_file(SHAPED.format(name="{name}")))).returncode == 0
        for user, deploy in deploying.items():
            _out, err = deploy.communicate(timeout=120)
            assert deploy.returncode == 0, f"uid {user.uid}: {err}"
        for user, net in users.items():
            assert _h1_addresses(user.run("inspect", "--lab", lab_name, "--format", "json")) == [[f"10.{net}.0.1/24"]]
            ping = user.run("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W2", f"10.{net}.0.2")
            assert "1 received" in ping.stdout, ping.stdout + ping.stderr
        assert _h1_addresses(run_cli("inspect", "--lab", lab_name, "--format", "json")) == [["10.0.0.1/24"]]
        assert nobody.run("destroy", "--lab", lab_name).returncode == 0
        assert _gone(NOBODY) == [], "nobody's holder went with its lab"
        assert _h1_addresses(stranger.run("inspect", "--lab", lab_name, "--format", "json")) == [["10.2.0.1/24"]]
        assert stranger.run("destroy", "--lab", lab_name).returncode == 0
        assert _gone(STRANGER) == []
        assert _h1_addresses(run_cli("inspect", "--lab", lab_name, "--format", "json")) == [["10.0.0.1/24"]], "root's runs on"
        assert run_cli("destroy", "--lab", lab_name).returncode == 0
    finally:
        for user, deploy in deploying.items():
            deploy.kill()
            deploy.communicate()
            user.run("destroy", "--lab", lab_name)


def test_pip_installs_the_tree_without_deprecation_warnings(nobody):
    """The package's metadata is current: an SPDX license, and setuptools builds it without a deprecation."""
    said = [line.strip() for line in nobody.installed.splitlines() if "deprecat" in line.lower()]
    assert said == [], said
    metadata = nobody.venv / "bin" / "python"
    shown = subprocess.run(
        [str(metadata), "-c", "from importlib.metadata import metadata; print(metadata('nestlab')['License-Expression'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == "Apache-2.0"


def _router(n: int) -> str:
    return (
        f"      startup-config: |\n        interface eth1\n         ip ospf network point-to-point\n"
        f"         ip ospf hello-interval 1\n         ip ospf dead-interval 4\n        router ospf\n"
        f"         ospf router-id 10.255.0.{n}\n         network 10.0.0.0/8 area 0\n         passive-interface eth2\n"
    )


OSPF = f"""name: {{name}}
topology:
  nodes:
    r1:
      kind: frr
{_router(1)}    r2:
      kind: frr
{_router(2)}    h1: {{exec: ["ip route add default via 10.1.0.1"]}}
    h2: {{exec: ["ip route add default via 10.2.0.1"]}}
  links:
    - {{endpoints: ["r1:eth1", "r2:eth1"], ipv4: ["10.0.12.1/24", "10.0.12.2/24"]}}
    - {{endpoints: ["h1:eth1", "r1:eth2"], ipv4: ["10.1.0.10/24", "10.1.0.1/24"]}}
    - {{endpoints: ["h2:eth1", "r2:eth2"], ipv4: ["10.2.0.10/24", "10.2.0.1/24"]}}
"""


def _ospf_full(nobody: User, lab: str, router: str) -> bool:
    shown = nobody.run("exec", "--lab", lab, router, "--", "vtysh", "-c", "show ip ospf neighbor json")
    try:
        neighbors = json.loads(shown.stdout).get("neighbors", {})
    except json.JSONDecodeError:
        return False
    return any(n.get("state", n.get("nbrState", "")).startswith("Full") for entries in neighbors.values() for n in entries)


@pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")
def test_an_ordinary_users_frr_routers_reach_ospf_full(nobody):
    """FRR's daemons run as root in nobody's user namespace (no frr user there): OSPF goes Full and carries h1's
    ping to h2 through both routers; the routers' daemons go with the lab."""
    lab = "ro" + uuid.uuid4().hex[:6]
    before = _machine()
    topo = nobody.write("ospf.yml", OSPF.replace("{name}", lab))
    try:
        deployed = nobody.run("deploy", "-t", str(topo))
        assert deployed.returncode == 0, deployed.stderr
        deadline = time.monotonic() + 30
        while not (full := all(_ospf_full(nobody, lab, r) for r in ("r1", "r2"))) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert full, nobody.run("exec", "--lab", lab, "r1", "--", "vtysh", "-c", "show ip ospf neighbor").stdout
        deadline, ping = time.monotonic() + 20, None
        while time.monotonic() < deadline and (ping is None or "1 received" not in ping.stdout):
            ping = nobody.run("exec", "--lab", lab, "h1", "--", "ping", "-c1", "-W1", "10.2.0.10")
        assert "1 received" in ping.stdout, ping.stdout + ping.stderr
        daemons = [procs.cmdline(pid).split(b"\0")[0] for pid in _rootless()]
        assert b"/usr/lib/frr/ospfd" in daemons, daemons
    finally:
        destroyed = nobody.run("destroy", "--lab", lab)
    assert destroyed.returncode == 0, destroyed.stderr
    assert _gone() == [], "the routers' daemons went with the lab"
    assert _machine() == before


def test_a_machine_that_refuses_user_namespaces_is_said_at_once(nobody, tmp_path):
    """Where ordinary users may make no user namespace (``user.max_user_namespaces`` = 0), a command says so and
    ends: it neither hangs nor leaves a process behind.  The limit is set in a user namespace of the test's own
    (mapping ids 0-65534 as they are), which nobody's command then runs in: the machine's own stays as it is."""
    said = tmp_path / "said.json"
    topo = nobody.write("refused.yml", SHAPED.format(name="rlrefused"))
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a user namespace in which nobody may make none, then nobody's deploy in it
        try:
            libc.unshare(libc.CLONE_NEWUSER)
            os.write(ready[1], b"u")
            os.read(go[0], 1)
            Path("/proc/sys/user/max_user_namespaces").write_text("0")
            command = nobody.command("deploy", "-t", str(topo))
            try:
                done = subprocess.run(command, capture_output=True, text=True, env=nobody.env(), cwd=nobody.home, timeout=30)
                said.write_text(json.dumps([done.returncode, done.stderr]))
            except subprocess.TimeoutExpired:
                said.write_text(json.dumps([None, "the refused command hung"]))
        finally:
            os._exit(0)
    os.read(ready[0], 1)
    for name in ("uid_map", "gid_map"):
        Path(f"/proc/{pid}/{name}").write_text(f"0 0 {NOBODY + 1}")
    os.write(go[1], b"g")
    os.waitpid(pid, 0)  # the child's own timeout bounds it
    code, stderr = json.loads(said.read_text())
    once = " ".join(stderr.split())  # as the terminal's width wrapped it
    assert code == 1, stderr
    assert "refuses you a user namespace (the kernel's limit on namespaces is reached (user.max_user_namespaces = 0" in once
    time.sleep(0.5)  # what a hung command left is reaped by now, or still there
    left = [pid for pid in procs.of_uid(NOBODY) if b"nestlab" in procs.cmdline(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "nothing of nobody's runs"


def _own_ssh(user, lab: str, node: str, *command: str) -> subprocess.CompletedProcess:
    """The user's own ssh to a node, through the lab's ssh config in the user's home (nestlab ssh --stdio behind it)."""
    config = user.home / ".ssh" / "config.d" / f"clab-{lab}.conf"
    return subprocess.run(
        [*as_user(NOBODY), "ssh", "-F", str(config), f"clab-{lab}-{node}", *command],
        capture_output=True,
        text=True,
        env=user.env(),
        timeout=60,
    )
