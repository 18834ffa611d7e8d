"""Privilege and reach: a non-root user without rootless mode gets a clear refusal and nothing half-done (its own
labs, in rootless mode, are tests/test_rootless.py's); nodes reach
neither the machine's network nor other namespaces unless the file asks; a lab's files are
root's alone; the caller's environment stays out of nodes unless passed by name."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

from conftest import NESTLAB, ROOT, leftovers, run_cli

from nestlab import names

# uid/gid 65534 (nobody) with one capability, to read the interpreter wherever it is installed
# (e.g. under /root): no CAP_NET_ADMIN, no CAP_SYS_ADMIN, as a user running nestlab without sudo.
AS_NOBODY = [
    "setpriv",
    "--reuid",
    "65534",
    "--regid",
    "65534",
    "--clear-groups",
    "--inh-caps",
    "+dac_read_search",
    "--ambient-caps",
    "+dac_read_search",
]
TWO = "name: {name}\ntopology:\n  nodes: {a: {env: {FROM_FILE: 'yes'}}, b: {}}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n"


def as_nobody(*args: str) -> subprocess.CompletedProcess:
    """nestlab as nobody with rootless mode off (this interpreter, under /root, is not one nobody could enter with)."""
    env = {**os.environ, "NESTLAB_ROOTLESS": "0"}
    return subprocess.run([*AS_NOBODY, *NESTLAB, *args], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)


def test_non_root_is_refused_clearly_and_nothing_is_made(topo_file, lab_name):
    path = topo_file(TWO)
    for folder in (path.parent, *path.parent.parents):  # a file the user can read (pytest's folders are root's alone)
        if folder == Path(tempfile.gettempdir()):
            break
        folder.chmod(folder.stat().st_mode | 0o005)
    for args in (["deploy", "-t", str(path)], ["destroy", "--lab", lab_name], ["cleanup", "--all"], ["doctor"]):
        result = as_nobody(*args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "needs root" in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert "rootless mode is unavailable here: NESTLAB_ROOTLESS=0" in result.stderr, result.stderr
        assert leftovers() == [] and not os.path.exists(names.lab_dir(lab_name))
    assert run_cli("deploy", "-t", str(path)).returncode == 0
    for args in (
        ["exec", "--lab", lab_name, "a", "--", "true"],
        ["destroy", "--lab", lab_name],
        ["link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--rate", "1mbit"],
    ):
        result = as_nobody(*args)
        assert result.returncode == 1 and "needs root" in result.stderr and "Traceback" not in result.stderr, (
            args,
            result.stderr,
        )
    listed = as_nobody("inspect", "--all")
    assert listed.returncode == 0 and lab_name in listed.stdout, "listing labs needs no privilege"
    inside = as_nobody("inspect", "--lab", lab_name)
    assert inside.returncode == 1 and "needs root" in inside.stderr, "looking inside namespaces does"
    assert run_cli("destroy", "--lab", lab_name).returncode == 0


def test_nodes_reach_nothing_outside_the_lab_unless_asked(lab_from):
    lab = lab_from(TWO)
    other = f"foreign-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", other], check=True)
    try:
        subprocess.run(["ip", "-n", other, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", other, "addr", "add", "198.51.100.7/32", "dev", "lo"], check=True)
        a = lab.nodes["a"]
        assert "default" not in a.cmd("ip route; ip -6 route"), "a node gets no default route unless the file gives one"
        listed = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True, check=True
        ).stdout
        targets = [line.split()[3].split("/")[0] for line in listed.splitlines()] + ["198.51.100.7"]
        for target in targets:  # the machine's own addresses and another namespace's: refused inside the node
            proc = a.popen(["ping", "-c1", "-W1", target], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out, _ = proc.communicate(timeout=10)
            assert proc.returncode != 0 and "unreachable" in out.lower(), (target, out)
        assert "1 received" in a.cmd(f"ping -c1 -W1 {lab.nodes['b'].intf('eth1').ip}")
    finally:
        subprocess.run(["ip", "netns", "del", other], check=False)


def test_a_labs_files_are_writable_by_root_alone(lab_from, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    lab = lab_from(
        "name: {name}\ntopology:\n  nodes:\n    o1: {kind: ovs}\n"
        f"    a: {{cmd: 'sleep 300', binds: ['{site}:/run/www:ro']}}\n    b: {{}}\n"
        "  links:\n    - endpoints: [a:eth1, o1:p1]\n    - endpoints: [b:eth1, o1:p2]\n"
    )
    assert "1 received" in lab.nodes["a"].cmd(f"ping -c1 -W2 {lab.nodes['b'].intf('eth1').ip}")
    top = names.lab_dir(lab.name)
    found = []
    for folder, _dirs, files in os.walk(top):
        for entry in [folder, *(os.path.join(folder, f) for f in files)]:
            info = os.lstat(entry)
            if not stat.S_ISLNK(info.st_mode):
                found.append((entry, info))
    assert len(found) > 5
    writable = [f"{path} {stat.filemode(info.st_mode)}" for path, info in found if info.st_mode & 0o022 or info.st_uid != 0]
    assert writable == [], "others could change the lab"
    assert os.stat(names.STATE_ROOT).st_mode & 0o022 == 0


def test_exec_keeps_the_callers_secrets_out_unless_passed(lab_from):
    lab = lab_from(TWO)
    env = {**os.environ, "API_TOKEN": "s3cret", "SSH_AUTH_SOCK": "/tmp/agent.sock", "LC_ALL": "C"}
    run = [*NESTLAB, "exec", "--lab", lab.name, "a", "--", "env"]
    plain = subprocess.run(run, capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout
    assert "s3cret" not in plain and "SSH_AUTH_SOCK" not in plain
    assert "FROM_FILE=yes" in plain and "PATH=" in plain and "LC_ALL=C" in plain
    passed = subprocess.run(
        [*NESTLAB, "exec", "-e", "API_TOKEN", "-e", "EXTRA=1", *run[len(NESTLAB) + 1 :]],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    assert "API_TOKEN=s3cret" in passed and "EXTRA=1" in passed and "SSH_AUTH_SOCK" not in passed
    os.environ["API_TOKEN"] = "s3cret"
    try:
        assert "s3cret" not in lab.nodes["a"].cmd("env"), "the Python API keeps it out too"
        given = lab.nodes["a"].popen("env", env={"API_TOKEN": "given"}, stdout=subprocess.PIPE, text=True)
        assert "API_TOKEN=given" in given.communicate(timeout=10)[0]
    finally:
        del os.environ["API_TOKEN"]
