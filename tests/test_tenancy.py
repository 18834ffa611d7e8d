"""Tenancy on one machine, as the attackers of docs/security.md meet it: a router's daemon (user ``frr``) plants a
link in its folder and root's ``nestlab save`` writes through none; an ordinary user (``nobody``) holding every lock
nestlab takes does not stall root's deploy or destroy; a user swapping the lab folder's parent for a link while root
writes and removes it gets nothing written or removed outside; and no file another user can read holds a lab's
password, a router's key or a node's ``env:`` value, not even the owner of the folder root's own topology is in."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import leftovers, run_cli

from nestlab import names
from nestlab.engine import access, etc_hosts, state
from nestlab.engine.handout import handed_out
from nestlab.errors import LabError
from nestlab.lab.lab import Lab

NOBODY = 65534
STRANGER = 4242  # a third user, neither root nor the lab's owner
SECRET = os.urandom(4).hex()
PASSWORD, KEY, ENV = f"pw-{SECRET}", f"k{SECRET}", f"envvalue-{SECRET}"  # FRR keeps 16 characters of an md5 key
FRR = pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")


def as_nobody(code: str, *args: str) -> list[str]:
    """The command line of the machine's Python as ``nobody`` (no groups), running ``code`` with ``args``."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-c", code, *args]


def _router_lab(credentials: bool) -> str:
    login = f"  defaults:\n    credentials: {{username: admin, password: {PASSWORD}}}\n" if credentials else ""
    config = textwrap.indent(
        f"key chain k1\n key 1\n  key-string {KEY}\ninterface eth1\n ip ospf message-digest-key 1 md5 {KEY}\n"
        "router ospf\n network 10.9.0.0/24 area 0\n",
        "        ",
    )
    return (
        f"name: {{name}}\ntopology:\n{login}  nodes:\n"
        f"    r1:\n      kind: frr\n      startup-config: |\n{config}"
        f"    h1:\n      kind: linux\n      env: {{TOKEN: {ENV}}}\n"
        "  links:\n    - endpoints: [r1:eth1, h1:eth1]\n"
    )


@FRR
def test_a_daemon_planting_a_link_in_its_folder_gets_nothing_written_through_it(topo_file, tmp_path, lab_name):
    victim = tmp_path / "root-owned"
    victim.write_text("root's own file\n")
    topo = topo_file(_router_lab(credentials=False))
    lab = Lab.from_file(topo)
    lab.deploy()
    try:
        folder = Path(names.node_dir(lab_name, "r1")) / "etc" / "frr"
        # the daemon's user, inside the router: its /etc/frr is that folder
        planted = lab.nodes["r1"].cmd(
            f"setpriv --reuid=frr --regid=frr --clear-groups sh -c 'ln -sfn {victim} /etc/frr/frr.conf && echo planted'"
        )
        assert "planted" in planted and (folder / "frr.conf").is_symlink(), planted
        saved = run_cli("save", "--lab", lab_name, "--to", str(tmp_path / "saved"))
        assert saved.returncode == 0, saved.stderr
        assert victim.read_text() == "root's own file\n", "root's save wrote through the daemon's link"
        mine = folder / "frr.conf"
        assert not mine.is_symlink() and "router ospf" in mine.read_text()
        info = mine.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (os.stat(folder).st_uid, 0o640), oct(info.st_mode)
        copy = tmp_path / "saved" / "r1" / "frr.conf"
        assert KEY in copy.read_text() and copy.stat().st_mode & 0o077 == 0, oct(copy.stat().st_mode)
    finally:
        lab.destroy()
    assert leftovers() == []


TAKEOVER = r"""
for f in /etc/frr/* /etc/frr/daemons /etc/frr/vtysh.conf /etc/frr/frr.conf; do
  printf "\nid -u >> {mark}/%s\n" "$(basename "$f")" >> "$f" || exit 1
done
echo rewritten
"""


@FRR
def test_a_taken_over_frr_rewriting_every_file_of_its_folder_runs_nothing_as_root(topo_file, lab_name):
    """As ``frr`` inside the router, a shell line appended to every file of its folder (``daemons``, which root's
    start script sourced, made if missing), then a node stop/start and a redeploy: no line runs as root."""
    mark = Path(tempfile.mkdtemp(prefix="nestlab-frr-mark-", dir="/var/tmp"))  # the machine's, in the router's view
    os.chmod(mark, 0o755)  # root alone may write it: a line run as frr cannot leave a mark, one run as root does
    topo = topo_file(_router_lab(credentials=False))
    lab = Lab.from_file(topo)
    lab.deploy()
    try:
        as_frr = f"setpriv --reuid=frr --regid=frr --clear-groups sh -c '{TAKEOVER.format(mark=mark)}'"
        assert "rewritten" in lab.nodes["r1"].cmd(as_frr)
        for step in (("node", "stop", "-t", str(topo), "r1"), ("node", "start", "-t", str(topo), "r1")):
            done = run_cli(*step)
            assert done.returncode == 0, done.stderr
        assert sorted(os.listdir(mark)) == [], "a line the daemon wrote ran as root at node start"
        assert "ospfd" in lab.nodes["r1"].cmd("ps -e -o comm="), "the router runs again"
        assert "rewritten" in lab.nodes["r1"].cmd(as_frr)
        done = run_cli("deploy", "-t", str(topo), "--reconfigure", timeout=180)
        assert done.returncode == 0, done.stderr
        assert sorted(os.listdir(mark)) == [], "a line the daemon wrote ran as root at the redeploy"
    finally:
        Lab.from_file(topo).destroy()
        shutil.rmtree(mark, ignore_errors=True)
    assert leftovers() == []


def test_a_taken_over_frr_answering_without_end_is_read_only_up_to_its_bound():
    """What root's vtysh prints (``nestlab save``'s running configuration, FRR's start) is what the daemons answer
    it: a taken-over daemon answering 20 MB is refused past 16 MiB, the answer unkept; a usual one is read whole."""
    from nestlab.backends.services import frr

    def answering(size: int):
        return lambda _args, **kw: subprocess.Popen(["sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x"], **kw)

    assert frr.running_config("r1", answering(1000)) == "x" * 1000
    with pytest.raises(LabError, match="more than 16 MiB of output"):
        frr.running_config("r1", answering(20_000_000))


@pytest.mark.parametrize("pub", ["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_as_a_logins_public_key_is_refused_at_once(topo_file, tmp_path, lab_name, pub):
    """``nobody`` owns the topology's folder and makes ``identity-file``'s ``.pub`` a FIFO (root's read would wait
    for a writer for ever) or a link to /dev/zero (a read without end): root's deploy refuses it at once, saying
    what it is."""
    top = Path(tempfile.mkdtemp(prefix="nestlab-key-", dir="/tmp"))
    os.chmod(top, 0o755)
    topo = top / "lab.clab.yml"
    topo.write_text(
        f"name: {lab_name}\ntopology:\n  nodes:\n"
        "    a: {kind: linux, credentials: {username: student, identity-file: student_key}}\n"
    )
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(top / "student_key")], check=True)
    (top / "student_key.pub").unlink()
    made = as_nobody(
        "import os, sys; os.mkfifo(sys.argv[1]) if sys.argv[2] == 'fifo' else os.symlink('/dev/zero', sys.argv[1])",
        str(top / "student_key.pub"),
        pub,
    )
    for path in (top, topo):
        os.chown(path, NOBODY, NOBODY)
    subprocess.run(made, check=True, cwd="/")
    try:
        started = time.monotonic()
        done = run_cli("deploy", "-t", str(topo), timeout=BOUND)
        took = time.monotonic() - started
        assert done.returncode != 0 and "student_key.pub" in done.stderr, done.stdout + done.stderr
        assert ("a FIFO" if pub == "fifo" else "a character device") in done.stderr, done.stderr
        assert took < 15, f"refused after {took:.1f} s"
    finally:
        run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
        shutil.rmtree(top, ignore_errors=True)
    assert leftovers() == []


HOLDER = r"""
import fcntl, glob, os, sys, time
held = []
for path in sys.argv[1:]:
    for found in sorted(glob.glob(path)) or [path]:
        try:
            fd = os.open(found, os.O_RDONLY | (os.O_CREAT if found.endswith(".lock") else 0), 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(found)
        except OSError:
            pass
print(" ".join(held), flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def _held_by_nobody(*paths: str):
    """``nobody`` holding ``flock`` on every path (glob) it can open, creating the ``.lock`` files it may; yields
    those it holds."""
    argv = as_nobody(HOLDER, *paths)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", start_new_session=True)
    try:
        yield proc.stdout.readline().split()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


LOCKS = [
    "/run",
    "/run/lock/clab-hosts.lock",
    "/run/nestlab",
    "/run/nestlab/*/lock",
    "/run/nestlab-mgmt",
    "/run/nestlab-mgmt/*.lock",
    "/var/lib/nestlab/ssh",
    "/var/lib/nestlab/ssh/.uids.lock",
    "/run/nestlab-lock/*",
]
BOUND = 45  # seconds: a deploy or destroy of two nodes takes a few; a stalled one never ends
SLACK = 2.5  # seconds a deploy or destroy may take beyond the same with no holder (a busy 2-core machine's noise)


def test_no_lock_an_ordinary_user_holds_stalls_roots_deploy_or_destroy(topo_file, lab_name):
    topo = topo_file(
        f"name: {{name}}\ntopology:\n  defaults:\n    credentials: {{username: admin, password: {PASSWORD}}}\n"
        "  nodes:\n    a: {kind: linux}\n    b: {kind: linux}\n",
        "lab.clab.yml",
    )
    planted = not os.path.exists("/run/lock/clab-hosts.lock")
    try:
        started = time.monotonic()  # the baseline: no one holds anything
        assert run_cli("deploy", "-t", str(topo), timeout=BOUND).returncode == 0
        base_deploy, started = time.monotonic() - started, time.monotonic()
        assert run_cli("destroy", "-t", str(topo), "--cleanup", timeout=BOUND).returncode == 0
        base_destroy = time.monotonic() - started
        for old in ("/var/lib/nestlab/ssh/.uids.lock", "/run/nestlab-mgmt/clab.json.lock"):  # as an older nestlab left them
            os.makedirs(os.path.dirname(old), exist_ok=True)
            os.close(os.open(old, os.O_WRONLY | os.O_CREAT, 0o644))
            os.chmod(old, 0o644)
        started = time.monotonic()
        with _held_by_nobody(*LOCKS) as held:
            done = run_cli("deploy", "-t", str(topo), timeout=BOUND)
            took_deploy = time.monotonic() - started
            assert done.returncode == 0, done.stderr
        with _held_by_nobody(*LOCKS) as held_after:  # now the lab's own lock and its network's exist
            started = time.monotonic()
            gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=BOUND)
            took_destroy = time.monotonic() - started
            assert gone.returncode == 0, gone.stderr
        print(f"held while deploying: {held}; while destroying: {held_after}")
        print(
            f"deploy {took_deploy:.2f} s, destroy {took_destroy:.2f} s with nobody holding what it could; "
            f"{base_deploy:.2f} s, {base_destroy:.2f} s with no one holding anything"
        )
        assert not any(p.startswith(("/run/nestlab/", "/run/nestlab-lock/")) for p in held + held_after), held_after
        # A holder may cost containerlab's lock its one second (docs/security.md), nothing more: a lock waited on
        # until a timeout (a stall of seconds) is a failure, not only one that never ends.
        slack = 1.0 + SLACK
        assert took_deploy < base_deploy + slack, f"deploy stalled: {took_deploy:.2f} s against {base_deploy:.2f} s"
        assert took_destroy < base_destroy + slack, f"destroy stalled: {took_destroy:.2f} s against {base_destroy:.2f} s"
    finally:
        if planted and os.path.exists("/run/lock/clab-hosts.lock") and os.stat("/run/lock/clab-hosts.lock").st_uid == NOBODY:
            os.unlink("/run/lock/clab-hosts.lock")
        run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert leftovers() == []


SWAPPER = r"""
import os, sys, time
home, target, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
real, spare = os.path.join(home, "labs"), os.path.join(home, "labs.real")
for _ in range(rounds):
    try:
        os.rename(real, spare)
        os.symlink(target, real)
        time.sleep(0.0005)
        os.unlink(real)
        os.rename(spare, real)
    except OSError:
        pass
    time.sleep(0.0002)
"""


def test_a_lab_folders_parent_swapped_for_a_link_gets_nothing_written_or_removed_outside(lab_name):
    """200 rounds of root writing the lab directory (inventories) and removing it (destroy --cleanup), while its
    owner swaps the folder holding it for a link to another place and back."""
    top = tempfile.mkdtemp(prefix="nestlab-race-", dir="/tmp")
    os.chmod(top, 0o711)
    home, victim = Path(top) / "user", Path(top) / "victim"
    (home / "labs").mkdir(parents=True)
    other = victim / f"clab-{lab_name}"
    other.mkdir(parents=True)
    (other / "another-labs-file").write_text("kept\n")
    topo = home / "labs" / "lab.clab.yml"
    topo.write_text(f"name: {lab_name}\ntopology:\n  nodes:\n    a: {{kind: linux}}\n")
    for path in (home, home / "labs", topo):
        os.chown(path, NOBODY, NOBODY)
    lab = Lab.from_file(topo)
    blueprint = handed_out(lab.blueprint)  # planned against the management network's leases, as a deploy plans it
    nodes = access.managed(blueprint)
    folder = access.lab_folder(blueprint)
    os.makedirs(names.lab_dir(lab_name), exist_ok=True)
    real = os.open(home / "labs", os.O_RDONLY | os.O_DIRECTORY)  # the real folder, whatever its name at the moment
    swapper = subprocess.Popen(as_nobody(SWAPPER, str(home), str(victim), "100000"), cwd="/", start_new_session=True)
    refused = landed = 0
    try:
        for _ in range(200):
            try:
                access._files(blueprint, folder, nodes)
            except (LabError, OSError):
                refused += 1
            else:  # a write not refused reached the real folder: the lab directory with its inventory
                made = os.open(f"clab-{lab_name}", os.O_RDONLY | os.O_DIRECTORY, dir_fd=real)
                try:
                    landed += "ansible-inventory.yml" in os.listdir(made)
                finally:
                    os.close(made)
            etc_hosts.record(lab_name, {"netns": [], "folder": folder})
            etc_hosts.withdraw(lab_name, folder_too=True)
            there = sorted(os.listdir(other)) if other.is_dir() else []
            assert there == ["another-labs-file"], "root wrote or removed outside the lab's folder"
        print(f"{refused} of 200 writes refused a link on the way, {landed} reached the real folder")
        assert landed == 200 - refused and landed >= 20, "root's writes must reach the real folder when no link is met"
    finally:
        os.close(real)
        os.killpg(swapper.pid, signal.SIGKILL)
        swapper.wait()
        shutil.rmtree(names.lab_dir(lab_name), ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)
    assert leftovers() == []


READER = r"""
import os, sys
secrets = [s.encode() for s in sys.argv[1].split(",")]
for root in sys.argv[2:]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/run/netns", "/run/udev")]
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as fh:
                    body = fh.read(1 << 22)
            except OSError:
                continue
            if any(s in body for s in secrets):
                print(path)
"""


@FRR
@pytest.mark.parametrize("credentials", [True, False], ids=["with-credentials", "without"])
def test_no_file_another_user_can_read_holds_a_password_a_router_key_or_an_env_value(topo_file, tmp_path, lab_name, credentials):
    """The topology is a user's (``nobody``), in a folder of theirs anyone may look into, deployed by root: a third
    user (uid 4242) reads every file it can and finds none of the lab's secrets, nor the lab's SSH keys."""
    top = tempfile.mkdtemp(prefix="nestlab-secrets-", dir="/tmp")
    os.chmod(top, 0o755)  # the user's own folder, where the lab directory goes: anyone may look
    topo = Path(top) / "lab.clab.yml"
    topo.write_text(_router_lab(credentials).replace("{name}", lab_name))
    os.chmod(topo, 0o600)
    for path in (top, topo):
        os.chown(path, NOBODY, NOBODY)
    done = run_cli("deploy", "-t", str(topo), timeout=180)
    try:
        assert done.returncode == 0, done.stderr
        assert state.read(lab_name) is not None
        roots = ["/run/nestlab", "/run/nestlab-mgmt", "/run/nestlab-lock", "/var/lib/nestlab", "/etc/ssh/ssh_config.d", top]
        argv = as_nobody(READER, _secrets(lab_name), *roots)
        argv[1:3] = [f"--reuid={STRANGER}", f"--regid={STRANGER}"]
        found = subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=120)
        assert found.returncode == 0, found.stderr
        assert found.stdout.split() == [], f"another user reads the lab's secrets in {found.stdout.split()}"
        # root does find them (the search works): in the state, and the router's own configuration; the lab's
        # files in the user's folder are the user's
        where = {os.path.basename(p) for p in _grep_as_root([PASSWORD, KEY, ENV], roots)}
        assert {"state.json", "frr.conf"} <= where, where
        inventory = Path(top, f"clab-{lab_name}", "ansible-inventory.yml").stat()
        assert inventory.st_uid == NOBODY and (inventory.st_mode & 0o077 == 0 or not credentials), oct(inventory.st_mode)
        assert json.dumps(ENV) in Path(names.lab_dir(lab_name), "state.json").read_text()
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
        shutil.rmtree(top, ignore_errors=True)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


@FRR
def test_roots_own_topology_in_another_users_folder_hands_that_user_no_password_or_key(lab_name):
    """Root deploys a topology of its own (0600, with a password) from a folder ``nobody`` owns: the lab directory
    written there keeps the passwords root's, and ``nobody`` reads no password, key or ``env:`` value in it."""
    top = tempfile.mkdtemp(prefix="nestlab-roots-", dir="/tmp")
    os.chmod(top, 0o755)
    os.chown(top, NOBODY, NOBODY)
    topo = Path(top) / "lab.clab.yml"
    topo.write_text(_router_lab(True).replace("{name}", lab_name))
    os.chmod(topo, 0o600)  # root's, as the lab directory's files must stay
    done = run_cli("deploy", "-t", str(topo), timeout=180)
    try:
        assert done.returncode == 0, done.stderr
        found = subprocess.run(as_nobody(READER, _secrets(lab_name), top), capture_output=True, text=True, cwd="/", timeout=120)
        assert found.returncode == 0, found.stderr
        assert found.stdout.split() == [], f"the folder's owner reads the lab's secrets in {found.stdout.split()}"
        inventory = Path(top, f"clab-{lab_name}", "ansible-inventory.yml")
        assert PASSWORD in inventory.read_text(), "the inventory holds the password (the search would find it)"
        info = inventory.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (0, 0o600), (info.st_uid, oct(info.st_mode))
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
        shutil.rmtree(top, ignore_errors=True)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


def _secrets(lab_name: str) -> str:
    """What no other user may read, for :data:`READER`: the password, the router's key, the ``env:`` value and the
    lab's SSH keys."""
    keys = Path(names.KEYS_ROOT, lab_name)
    lab_keys = [(keys / k).read_text().splitlines()[1] for k in ("id_ed25519", "ssh_host_ed25519_key") if (keys / k).exists()]
    return ",".join((PASSWORD, KEY, ENV, *lab_keys))


def _grep_as_root(secrets: list[str], roots: list[str]) -> list[str]:
    found = []
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                with contextlib.suppress(OSError):
                    if any(s.encode() in Path(folder, name).read_bytes() for s in secrets):
                        found.append(os.path.join(folder, name))
    return found
