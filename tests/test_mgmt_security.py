"""The management plane as an attacker meets it: a password login lands as the lab's unprivileged user in a
view of its own (the machine's /root, /etc and /tmp untouched), with no group or sudo right of a machine user of its
name and no setuid program working, its processes ending with the lab, no file others may read holds a password,
a flood of connections to port 22 starts at most 32 sshd and idle ones end after the grace time, IPv4
forwarding is put back when the last management network goes, a bad username is refused with its line,
and a damaged /etc/hosts block is reported, never guessed."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import NESTLAB, leftovers, run_cli

from nestlab.backends.kernel import mgmtnet, procs
from nestlab.engine import etc_hosts as hosts
from nestlab.engine import login_uids, sshgate

PASSWORD = "lab-Secret1-" + os.urandom(4).hex()  # unique: found only where this test's deploy wrote it
CREDENTIALS = f"""name: {{name}}
topology:
  defaults:
    credentials: {{username: admin, password: {PASSWORD}}}
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux}}
"""
SSH = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"]


def _ssh_password(address: str, command: str, user: str = "admin") -> subprocess.CompletedProcess:
    """OpenSSH's client through sshpass (the password in its environment), keys refused."""
    return subprocess.run(
        ["sshpass", "-e", "ssh", *SSH, "-o", "PubkeyAuthentication=no", f"{user}@{address}", command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SSHPASS": PASSWORD},
    )


def _address(lab: str, node: str) -> str:
    with open("/etc/hosts") as fh:
        return next(line.split("\t")[0] for line in fh if line.split("\t")[1:2] == [f"clab-{lab}-{node}"])


def _sshd_of(lab: str) -> int:
    """sshd processes in the lab's nodes' network namespaces."""
    spaces = {os.stat(f"/run/netns/{n}").st_ino for n in os.listdir("/run/netns") if n.startswith(f"clab-{lab}-")}
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd" and os.stat(f"/proc/{pid}/ns/net").st_ino in spaces:
                count += 1
    return count


def _written_since(start: float, roots: list[str]) -> list[str]:
    """Regular files under ``roots`` changed since ``start``."""
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/run/netns", "/run/udev")]
            for name in files:
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    info = os.lstat(path)
                    if stat.S_ISREG(info.st_mode) and info.st_mtime >= start and info.st_size < 1 << 20:
                        found.append(path)
    return found


def _holds(path: str, text: str) -> bool:
    try:
        return text.encode() in Path(path).read_bytes()
    except OSError:  # a namespace pinned on a file
        return False


def test_a_password_login_writes_nothing_of_the_machine_and_no_file_others_read_holds_the_password(topo_file, tmp_path, lab_name):
    topo = topo_file(CREDENTIALS, "lab.clab.yml")
    mark = f"nestlab-{lab_name}"
    targets = [Path(d) / mark for d in ("/root", "/etc", "/tmp", "/var/tmp", "/dev/shm")]
    start = time.time()
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        a = _address(lab_name, "a")
        attack = _ssh_password(
            a,
            f"id -u; touch /root/{mark}; touch /etc/{mark}; for d in /tmp /var/tmp /dev/shm; do echo x > $d/{mark}; done; cat /tmp/{mark}",
        )
        assert attack.returncode == 0 and attack.stdout.split()[-1] == "x", attack.stdout + attack.stderr  # its own /tmp
        uid = int(attack.stdout.split()[0])
        assert uid != 0 and "Permission denied" in attack.stderr, attack.stderr
        assert [str(p) for p in targets if p.exists()] == [], "the session wrote the machine's files"
        as_root = _ssh_password(a, "id -u", user="root")
        assert as_root.returncode != 0 and "Permission denied" in as_root.stderr, "root never logs in with a password"
        key = f"/var/lib/nestlab/ssh/{lab_name}/id_ed25519"
        root = subprocess.run(
            ["ssh", *SSH, "-o", "BatchMode=yes", "-i", key, f"root@{a}", "id -u"], capture_output=True, text=True, timeout=60
        )
        assert root.stdout.strip() == "0", root.stderr  # the lab's key is root's, as on a node without credentials
        keyed = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", f"clab-{lab_name}-b", "id -u"], capture_output=True, text=True, timeout=60
        )
        uids = login_uids.recorded(f"/var/lib/nestlab/ssh/{lab_name}")
        assert uids["a"] == uid and keyed.stdout.strip() == str(uids["b"]), keyed.stderr  # b's user, with the lab's key
        roots = ["/run", "/var/lib", "/etc", "/tmp", str(tmp_path)]
        holding = [p for p in _written_since(start, roots) if _holds(p, PASSWORD) and p != str(topo)]
        folder = tmp_path / f"clab-{lab_name}"
        for expected in (
            f"/run/nestlab/{lab_name}/state.json",
            folder / "ansible-inventory.yml",
            folder / "nornir-simple-inventory.yml",
        ):
            assert str(expected) in holding, (expected, holding)
        readable = [f"{p} {stat.filemode(os.stat(p).st_mode)}" for p in holding if os.stat(p).st_mode & 0o077]
        assert readable == [], "others may read the password"
    finally:
        for path in targets:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


def _logged_in_sessions(lab: str) -> int:
    """sshd sessions of the lab's nodes that have let their user in (the title names the user)."""
    spaces = {os.stat(f"/run/netns/{n}").st_ino for n in os.listdir("/run/netns") if n.startswith(f"clab-{lab}-")}
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            if title.startswith(b"sshd: ") and b"@" in title and os.stat(f"/proc/{pid}/ns/net").st_ino in spaces:
                count += 1
    return count


def test_a_flood_of_connections_starts_at_most_32_sshd_and_idle_ones_end_after_the_grace_time(topo_file, lab_name, monkeypatch):
    grace = 5
    monkeypatch.setenv("NESTLAB_SSH_GRACE", str(grace))
    topo = topo_file(CREDENTIALS, "lab.clab.yml")
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    flood: list[socket.socket] = []
    try:
        assert done.returncode == 0, done.stderr
        a = _address(lab_name, "a")
        began = time.monotonic()
        for _ in range(200):
            flood.append(socket.create_connection((a, 22), timeout=10))
        peak = 0
        while time.monotonic() < began + grace - 1:  # every session is still in its grace time
            peak = max(peak, _sshd_of(lab_name))
            time.sleep(0.2)
        assert 0 < peak <= 32, peak
        answered = closed = 0
        for sock in flood:
            sock.settimeout(0.5)
            with contextlib.suppress(OSError):
                first = sock.recv(64)
                answered += first.startswith(b"SSH-2.0-")
                closed += first == b""
        assert answered <= sshgate.MAX_STARTUPS and closed >= 200 - 2 * sshgate.MAX_STARTUPS, (answered, closed)
        deadline = began + grace + 10
        while _sshd_of(lab_name) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sshd_of(lab_name) == 0, "sessions that never logged in end after the grace time"
        assert time.monotonic() - began >= grace - 1
        login = _ssh_password(a, "hostname")
        assert login.stdout.strip() == "a", login.stderr  # the slots are free again
        # Sessions that have logged in take no slot: more of them than the cap (Ansible's forks, in waves that
        # each fit under it), and a login beside them still gets in.
        key = ["-i", sshgate.client_key(lab_name), "-o", "BatchMode=yes"]
        deadline = time.monotonic() + 10
        while _logged_in_sessions(lab_name) and time.monotonic() < deadline:  # the login above may still be ending
            time.sleep(0.2)
        held: list[subprocess.Popen] = []
        try:
            for _wave in range(2):
                held += [
                    subprocess.Popen(
                        ["ssh", *SSH, *key, f"root@{a}", "sleep 60"], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                    for _ in range(sshgate.MAX_STARTUPS // 2 + 2)
                ]
                deadline = time.monotonic() + 30
                while _logged_in_sessions(lab_name) < len(held) and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert _logged_in_sessions(lab_name) == len(held)
            assert len(held) > sshgate.MAX_STARTUPS
            login = _ssh_password(a, "hostname")
            assert login.stdout.strip() == "a", login.stderr
        finally:
            for proc in held:
                proc.kill()
                proc.wait()
    finally:
        for sock in flood:
            sock.close()
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


# answers each "assword" prompt of a program on a terminal (chfn asks for the login's password), prints its output
PTY_DRIVE = """import os, pty, sys, time
answers = sys.argv[1].split(",")
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
out = b""
end = time.time() + 15
while time.time() < end:
    try:
        d = os.read(fd, 1024)
    except OSError:
        break
    if not d:
        break
    out += d
    if b"assword" in d and answers:
        time.sleep(0.2)
        os.write(fd, (answers.pop(0) + "\\n").encode())
print(out.decode(errors="replace"))
print("exit", os.waitpid(pid, 0)[1] >> 8)
"""


def _etc_backups() -> dict[str, str | None]:
    """What chfn, passwd and friends write beside the machine's account files."""
    found: dict[str, str | None] = {}
    for name in ("passwd-", "passwd+", "shadow-", "shadow+", "group-", "group+", "gshadow-", "gshadow+", "passwd", "shadow"):
        try:
            found[name] = hashlib.sha256(Path("/etc", name).read_bytes()).hexdigest()
        except FileNotFoundError:
            found[name] = None
    return found


def test_a_password_login_has_no_group_or_setuid_right_of_a_machine_user_of_its_name_and_ends_with_its_lab(topo_file, lab_name):
    user, group = "nlu" + os.urandom(3).hex(), "nlg" + os.urandom(3).hex()
    topo = topo_file(CREDENTIALS.replace("username: admin", f"username: {user}"), "lab.clab.yml")
    made: list[list[str]] = []
    uid = None
    try:
        # a machine user of the login's name, member of a group of this machine (as postgres is of ssl-cert)
        for make, undo in (
            (["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", user], ["userdel", user]),
            (["groupadd", group], ["groupdel", group]),
        ):
            subprocess.run(make, check=True, capture_output=True)
            made.insert(0, undo)
        subprocess.run(["gpasswd", "-a", user, group], check=True, capture_output=True)
        rule = Path(f"/etc/sudoers.d/{user}")  # a sudoers rule by name (cloud images': 90-cloud-init-users)
        made.insert(0, ["rm", "-f", str(rule)])
        rule.write_text(f"{user} ALL=(ALL) NOPASSWD:ALL\n")
        rule.chmod(0o440)
        before = _etc_backups()
        done = run_cli("deploy", "-t", str(topo), timeout=120)
        assert done.returncode == 0, done.stderr
        a = _address(lab_name, "a")
        uid = login_uids.recorded(f"/var/lib/nestlab/ssh/{lab_name}")["a"]
        assert uid in login_uids.UIDS and 1879048192 <= uid <= 2147352575  # systemd's unused range
        drive = base64.b64encode(PTY_DRIVE.encode()).decode()
        session = _ssh_password(
            a,
            f"id; grep -c {user} /etc/group; sudo -n id; echo sudo=$?; echo {drive} | base64 -d > /tmp/d.py; "
            f"python3 /tmp/d.py {PASSWORD} chfn -r 42; python3 /tmp/d.py {PASSWORD},Zz-New-Pass9x,Zz-New-Pass9x passwd",
            user=user,
        )
        out = session.stdout
        assert f"uid={uid}({user}) gid={uid}({user}) groups={uid}({user})" in out, out + session.stderr
        assert group not in out and out.splitlines()[1] == "1", out  # its own group line, in no machine group
        assert "sudo=1" in out and "uid=0" not in out, out + session.stderr  # no sudo by name, no setuid root
        assert _etc_backups() == before, "chfn or passwd changed the machine's account files"
        # what outlives a session: a process in a user namespace of its own, one that forks anew on SIGTERM
        _ssh_password(
            a,
            "nohup unshare -Urnu sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 & "
            "nohup setsid sh -c 'trap \"setsid sleep 901 </dev/null >/dev/null 2>&1 &\" TERM; while :; do sleep 0.2; done' "
            ">/dev/null 2>&1 & sleep 0.5",
            user=user,
        )
        assert procs.of_uid(uid), "the session left its processes running"
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
        left = procs.of_uid(uid) if uid is not None else []
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        for undo in made:
            subprocess.run(undo, capture_output=True)
    assert gone.returncode == 0, gone.stderr
    assert left == [], "a login's processes outlived its lab"
    assert leftovers() == []


def test_logins_on_two_nodes_are_two_users_that_cannot_signal_or_read_each_other_and_end_with_their_lab(topo_file, lab_name):
    """Nodes share the machine's processes: the login on b leaves a process holding a secret in its environment
    and its cwd in its home; the login on a, same name and password, is another uid and gets EPERM from ``kill -0``
    and EACCES from that process's ``environ`` and ``cwd``, which the login on b itself reads (so the pid is the
    right one).  Destroy leaves no process of either uid."""
    topo = topo_file(CREDENTIALS, "lab.clab.yml")
    secret = "nestlab-env-" + os.urandom(4).hex()
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    uids: dict[str, int] = {}
    try:
        assert done.returncode == 0, done.stderr
        a, b = _address(lab_name, "a"), _address(lab_name, "b")
        for node, address in (("a", a), ("b", b)):
            left = _ssh_password(
                address,
                f"id -u; stat -c %u ~; cd ~ && {{ NESTLAB_SECRET={secret} nohup sleep 300 >/dev/null 2>&1 & echo $!; }}",
            )
            uid, home, pid = left.stdout.split()
            assert uid == home, f"{node}: the login's home is its own uid's: " + left.stdout + left.stderr
            uids[node] = int(uid)
            if node == "b":
                on_b = int(pid)
        assert uids["a"] != uids["b"], f"one uid on both nodes: {uids}"
        assert set(uids.values()) <= set(login_uids.UIDS), uids
        assert login_uids.recorded(f"/var/lib/nestlab/ssh/{lab_name}") == uids, "each node's uid is recorded for destroy"
        reach = f"kill -0 {on_b}; echo kill=$?; cat /proc/{on_b}/environ; echo environ=$?; readlink /proc/{on_b}/cwd; echo cwd=$?"
        own = _ssh_password(b, reach)
        assert "kill=0" in own.stdout and secret in own.stdout and "cwd=0" in own.stdout, own.stdout + own.stderr
        other = _ssh_password(a, reach)
        assert "kill=1" in other.stdout and "Operation not permitted" in other.stderr, other.stdout + other.stderr
        assert "environ=1" in other.stdout and secret not in other.stdout, other.stdout + other.stderr
        assert "cwd=1" in other.stdout and "Permission denied" in other.stderr, other.stdout + other.stderr
        assert all(procs.of_uid(uid) for uid in uids.values()), "each node's login left a process running"
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
        left_behind = [pid for uid in uids.values() for pid in procs.of_uid(uid)]
        for pid in left_behind:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
    assert gone.returncode == 0, gone.stderr
    assert left_behind == [], "a login's processes outlived its lab"
    assert leftovers() == []


def _free(count: int) -> list[int]:
    """The next ``count`` login uids nestlab would give, as things stand."""
    held = login_uids._held()
    return [uid for uid in login_uids.UIDS if uid not in held and not login_uids._used(uid)][:count]


def test_a_uid_of_a_live_process_a_machine_user_or_group_or_another_lab_is_not_given_to_a_login(tmp_path):
    """The uids nestlab would give next are held: by a live process, a user and a group of this machine and another
    lab's record; a lab with three logins gets none of them, and three uids."""
    first = _free(4)
    os.makedirs(login_uids.names.KEYS_ROOT, exist_ok=True)
    other = Path(login_uids.names.KEYS_ROOT) / ("t" + os.urandom(4).hex())
    user, group = "nlu" + os.urandom(3).hex(), "nlg" + os.urandom(3).hex()
    survivor = subprocess.Popen(["setpriv", f"--reuid={first[0]}", f"--regid={first[0]}", "--clear-groups", "sleep", "60"])
    try:
        subprocess.run(["useradd", "-M", "-N", "-u", str(first[1]), "-s", "/usr/sbin/nologin", user], check=True)
        subprocess.run(["groupadd", "-g", str(first[2]), group], check=True)
        other.mkdir(mode=0o700)
        (other / login_uids.RECORD).write_text(json.dumps({"r1": first[3]}))
        deadline = time.monotonic() + 5
        while not procs.of_uid(first[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        given = login_uids.given(str(tmp_path), ["a", "b", "c"])
    finally:
        survivor.kill()
        survivor.wait()
        subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(other, ignore_errors=True)
    assert len(set(given.values())) == 3 and not set(given.values()) & set(first), (given, first)
    assert login_uids.recorded(str(tmp_path)) == given


def test_clients_waiting_at_the_password_prompt_are_not_logged_in(topo_file, lab_name, tmp_path, monkeypatch):
    monkeypatch.setenv("NESTLAB_SSH_GRACE", "20")
    topo = topo_file(CREDENTIALS, "lab.clab.yml")
    slow = tmp_path / "askpass.sh"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    clients: list[subprocess.Popen] = []
    try:
        assert done.returncode == 0, done.stderr
        a = _address(lab_name, "a")
        env = {**os.environ, "SSH_ASKPASS": str(slow), "SSH_ASKPASS_REQUIRE": "force"}
        for i in range(40):  # OpenSSH titles its monitor `sshd: USER [priv]` once the client names a user
            clients.append(
                subprocess.Popen(
                    ["ssh", *SSH, "-o", "PubkeyAuthentication=no", "-l", f"nobody-{i}", a, "true"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            )
            time.sleep(0.1)
        peak = 0
        end = time.monotonic() + 6
        while time.monotonic() < end:
            peak = max(peak, _sshd_of(lab_name))
            time.sleep(0.2)
        assert 0 < peak <= 32, peak
    finally:
        for proc in clients:
            proc.kill()
            proc.wait()
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


def test_ip_forward_is_put_back_when_the_last_management_network_goes(tmp_path):
    forward = Path("/proc/sys/net/ipv4/ip_forward")
    before = forward.read_text()
    names = ["tfw" + os.urandom(3).hex() for _ in range(2)]
    files = []
    for name in names:
        path = tmp_path / f"{name}.clab.yml"
        path.write_text(f"name: {name}\ntopology:\n  nodes:\n    n1: {{}}\n")
        files.append(path)
    try:
        forward.write_text("0")
        for path in files:
            assert run_cli("deploy", "-t", str(path), timeout=120).returncode == 0
        assert forward.read_text().strip() == "1", "the network forwards its nodes' traffic"
        assert run_cli("destroy", "-t", str(files[0])).returncode == 0
        assert forward.read_text().strip() == "1", "the other lab still uses the network"
        assert run_cli("destroy", "-t", str(files[1])).returncode == 0
        assert forward.read_text().strip() == "0", "put back as it was"
        forward.write_text("1")  # already on: nothing to put back, and a record no network backs is stale
        Path(mgmtnet.FORWARD).write_text("0")
        assert run_cli("deploy", "-t", str(files[0]), timeout=120).returncode == 0
        assert run_cli("destroy", "-t", str(files[0])).returncode == 0
        assert forward.read_text().strip() == "1" and not os.path.exists(mgmtnet.FORWARD)
    finally:
        for path in files:
            run_cli("destroy", "-t", str(path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(mgmtnet.FORWARD)
        forward.write_text(before)
    assert leftovers() == []


@pytest.mark.parametrize(
    ("credentials", "message"),
    [
        ("{username: Admin, password: x}", "'Admin' is not a user name"),
        ("{username: 'ad:min', password: x}", "'ad:min' is not a user name"),
        ('{username: "admin\\n", password: x}', "'admin\\n' is not a user name"),
        ('{username: "admin\\nroot::0:0::/:/bin/sh", password: x}', "is not a user name"),
        ("{username: " + "a" * 33 + ", password: x}", "is not a user name"),
        ("{username: root, password: x}", "a password login is never root"),
        ("{username: admin, password: " + "x" * 257 + "}", "password is longer than 256 bytes"),
        ('{username: admin, password: "x\\nroot"}', "password may not hold '\\n'"),
        ("{username: admin, identity-file: 'k\"\\n\\tProxyCommand touch /tmp/p'}", "identity-file may not hold"),
    ],
)
def test_a_bad_username_is_refused_at_its_line_and_nothing_is_made(tmp_path, lab_name, credentials, message):
    path = tmp_path / "bad.clab.yml"
    path.write_text(f"name: {lab_name}\ntopology:\n  nodes:\n    a: {{kind: linux, credentials: {credentials}}}\n")
    refused = run_cli("deploy", "-t", str(path))
    assert refused.returncode == 2 and f"{path}:4:" in refused.stderr and message in refused.stderr, refused.stderr
    assert leftovers() == [] and not (tmp_path / f"clab-{lab_name}").exists()


def test_only_a_complete_hosts_block_is_removed_and_a_damaged_one_is_reported(tmp_path):
    lab = "hx" + os.urandom(3).hex()
    start, end = f"###### CLAB-{lab}-START ######", f"###### CLAB-{lab}-END ######"
    other = "###### CLAB-other-START ######"
    path = tmp_path / "hosts"
    kept = ["127.0.0.1\tlocalhost", "10.0.0.9\tkeep-me", other, "10.0.0.8\tother-lab", "::1\tip6-localhost"]
    path.write_text("\n".join([kept[0], start, "172.20.20.2\tclab-x-a", end, *kept[1:]]) + "\n")
    hosts.block(lab, [], path=str(path))
    assert path.read_text().splitlines() == kept, "only the lab's block goes; another lab's damaged one stays"
    hosts.block(lab, ["172.20.20.3\tclab-x-b"], path=str(path))
    assert path.read_text().splitlines() == [*kept, start, "172.20.20.3\tclab-x-b", end]
    for damaged in (
        [kept[0], start, "10.0.0.9\tkeep-me", "::1\tip6-localhost"],  # no END at all
        [kept[0], start, "10.0.0.9\tkeep-me", start, "172.20.20.2\tclab-x-a", end],  # another START before its END
    ):
        text = "\n".join(damaged) + "\n"
        path.write_text(text)
        for lines in ([], ["172.20.20.3\tclab-x-b"]):
            with pytest.raises(hosts.DamagedHosts, match=f"{path}:2: "):
                hosts.block(lab, lines, path=str(path))
            assert path.read_text() == text, "nothing of the file is dropped or guessed"


STUDENT = """name: {name}
topology:
  nodes:
    a: {kind: linux, credentials: {username: student, identity-file: student_key}}
    b: {kind: linux}
"""


def _ssh_key(key: Path, target: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", *SSH, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", str(key), target, command],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_logins_own_key_logs_in_as_the_login_never_as_root(topo_file, tmp_path, lab_name):
    """A class hands each student a key through ``credentials: {username, identity-file}``: that key is the
    student's on its node, and neither root's there nor anyone's on the lab's other nodes."""
    key = tmp_path / "student_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    topo = topo_file(STUDENT, "lab.clab.yml")
    mark = f"nestlab-{lab_name}"
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        a, b = _address(lab_name, "a"), _address(lab_name, "b")
        for target in (f"root@{a}", f"root@{b}", f"student@{b}"):
            refused = _ssh_key(key, target, "id -u")
            assert refused.returncode == 255 and "Permission denied" in refused.stderr, f"{target}: {refused.stdout}"
        student = _ssh_key(key, f"student@{a}", f"id -u; touch /root/{mark} /etc/{mark}")
        assert student.stdout.split()[:1] and int(student.stdout.split()[0]) in login_uids.UIDS, student.stdout + student.stderr
        assert "Permission denied" in student.stderr and not os.path.exists(f"/root/{mark}")
        assert not os.path.exists(f"/etc/{mark}")
        config = subprocess.run(["ssh", "-o", "BatchMode=yes", f"clab-{lab_name}-a", "id -u"], capture_output=True, text=True)
        assert config.stdout.strip() == student.stdout.split()[0], "the ssh config's user and key: " + config.stderr
        lab_key = f"/var/lib/nestlab/ssh/{lab_name}/id_ed25519"
        assert _ssh_key(Path(lab_key), f"root@{a}", "id -u").stdout.strip() == "0", "the lab's key stays root's"
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


@pytest.mark.parametrize(
    ("title", "logged_in"),
    [
        ("sshd: admin@notty", True),  # OpenSSH before 9.8
        ("sshd: admin@pts/3", True),
        ("sshd-session: admin@notty", True),  # OpenSSH 9.8 and later (Debian 13)
        ("sshd-session: admin@pts/0", True),
        ("sshd: admin [priv]", False),  # at the password prompt
        ("sshd-session: admin [priv]", False),
        ("sshd-session: admin [net]", False),
        ("sshd: [accepted]", False),
    ],
)
def test_the_gate_knows_a_logged_in_session_by_the_titles_of_openssh_before_and_after_9_8(title, logged_in):
    """A stub session: a shell whose child titles itself as OpenSSH's session process does."""
    stub = subprocess.Popen(["bash", "-c", f"exec -a '{title}' sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not any(
            Path(f"/proc/{c}/cmdline").read_bytes().startswith(title.encode()) for c in sshgate.procs.children(stub.pid)
        ):
            assert time.monotonic() < deadline, "the stub did not title itself"
            time.sleep(0.02)
        assert sshgate._logged_in(stub.pid) is logged_in
    finally:
        os.killpg(stub.pid, 9)
        stub.wait()


def test_the_gate_reads_a_title_only_up_to_its_bound():
    """A login titles a process as OpenSSH's session and gives it a megabyte of arguments (its owner sets
    /proc/PID/cmdline, up to a quarter of its stack limit): the gate still knows it logged in, and root reads
    at most procs.CMDLINE_BYTES of it."""
    title, arguments = "sshd: student@notty", ["x" * 100_000] * 10
    stay = f'exec -a "$0" {sys.executable} -c "import time; time.sleep(30)" "$@" & wait'  # any arguments, and it stays
    stub = subprocess.Popen(["bash", "-c", stay, title, *arguments], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not (
            titled := [c for c in procs.children(stub.pid) if Path(f"/proc/{c}/cmdline").read_bytes().startswith(title.encode())]
        ):
            assert time.monotonic() < deadline, "the stub did not title itself"
            time.sleep(0.02)
        assert len(Path(f"/proc/{titled[0]}/cmdline").read_bytes()) > 1_000_000
        assert len(procs.cmdline(titled[0])) <= procs.CMDLINE_BYTES
        assert sshgate._logged_in(stub.pid) is True
    finally:
        os.killpg(stub.pid, 9)
        stub.wait()


def _put(path: str, text: str) -> None:
    Path(path + ".nestlab-test").write_text(text)
    os.chmod(path + ".nestlab-test", 0o644)
    os.replace(path + ".nestlab-test", path)


def test_a_login_uid_is_never_in_a_users_subordinate_range(tmp_path):
    """An administrator lends alice and bob subordinate ids over the uids nestlab would choose next: no login uid of
    a lab of three logins falls in either (destroy would kill alice's namespace's processes)."""
    first = _free(1)[0]
    lent = {"/etc/subuid": f"alice:{first - 10}:20\n", "/etc/subgid": f"bob:{first + 10}:100\n"}
    kept = {path: Path(path).read_text() if os.path.exists(path) else None for path in lent}
    os.makedirs(login_uids.names.KEYS_ROOT, exist_ok=True)
    try:
        for path, line in lent.items():
            _put(path, (kept[path] or "") + line)
        chosen = login_uids.given(str(tmp_path), ["a", "b", "c"])
    finally:
        for path, text in kept.items():
            if text is None:
                os.unlink(path)
            else:
                _put(path, text)
    assert len(set(chosen.values())) == 3, chosen
    assert not set(chosen.values()) & set(range(first - 10, first + 110)), chosen


def test_a_folder_renamed_under_a_deploy_writes_no_line_into_the_ssh_config_every_user_reads(tmp_path, lab_name):
    """Another user who owns the parent of the folder root deploys from can rename it while the deploy runs, and a
    relative ``identity-file`` is joined to that folder's path, which goes into the ssh config every user's ssh
    reads: a path with a line break or a quote is refused, and the lab's ssh config is never written (before, a
    ``Host *`` block with the renamer's ProxyCommand was: root's next ssh ran it).  Here ``nobody`` owns the parent
    and renames the folder root's deploy was started in, once the deploy runs (its Python still starting)."""
    top = Path(tempfile.mkdtemp(prefix="nestlab-rename-", dir="/tmp"))  # a path nobody may walk
    parent = top / "theirs"
    folder, renamed = parent / "lab", parent / 'lab"\nHost *\n\tProxyCommand touch nestlab-renamed\n#'
    folder.mkdir(parents=True)
    (folder / "lab.clab.yml").write_text(STUDENT.replace("{name}", lab_name))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "student_key")], check=True)
    os.chmod(top, 0o755)
    os.chown(parent, 65534, 65534)
    config = Path(f"/etc/ssh/ssh_config.d/clab-{lab_name}.conf")
    deploy = subprocess.Popen(
        [*NESTLAB, "deploy", "-t", "lab.clab.yml"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder
    )
    try:
        rename = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "mv", "-T", str(folder), str(renamed)]
        subprocess.run(rename, check=True, timeout=10)
        assert deploy.poll() is None, "the deploy ended before the rename: it did not run while the folder moved"
        _out, err = deploy.communicate(timeout=120)
        assert deploy.returncode != 0 and "identity-file" in err and "ssh config" in err, err
        assert not config.exists()
    finally:
        deploy.kill()
        deploy.wait()
        run_cli("destroy", "--lab", lab_name, timeout=120)
        shutil.rmtree(top, ignore_errors=True)
    assert leftovers() == []
