"""What a user hands nestlab (run as root) never reaches further than it should: the folder a deploy runs in
imports nothing as nestlab, a symbolic link in the lab directory is replaced (never followed), a topology
read from standard input is root's alone and goes with its lab, rendered manifests are 0600, and a
``prefix:`` or ``identity-file`` that would break system-wide files is refused with its line."""

from __future__ import annotations

import base64
import os
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, leftovers, run_cli

from nestlab.cli.clab.topo import KEPT

PASSWORD = "inputs-Secret1-" + os.urandom(4).hex()
NOBODY = 65534
# -P: the test's own command must not import the planted package (the helpers nestlab starts are the question)
NESTLAB_P = [sys.executable, "-P", "-m", "nestlab.cli.app"]


def _destroyed(topo: Path) -> None:
    gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr


def test_a_deploy_from_a_folder_holding_a_nestlab_package_runs_none_of_it(tmp_path, lab_name):
    """The helpers nestlab starts as ``python -m nestlab...`` (the SSH gate, a port forwarder) run as root: the
    working directory (perhaps another user's) is not first on their sys.path."""
    planted = tmp_path / "cwd"
    (planted / "nestlab").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    (planted / "nestlab" / "__init__.py").write_text(
        f"import sys\nopen({str(marker)!r}, 'a').write(repr(sys.orig_argv) + '\\n')\nraise SystemExit(3)\n"
    )
    port = random.randint(20000, 29999)
    topo = tmp_path / "lab.clab.yml"
    topo.write_text(
        f"name: {lab_name}\nallow_host_ports: true\ntopology:\n  nodes:\n"
        f"    a: {{kind: linux, ports: ['127.0.0.1:{port}:80']}}\n    b: {{kind: linux}}\n"
    )
    try:
        done = subprocess.run([*NESTLAB_P, "deploy", "-t", str(topo)], capture_output=True, text=True, timeout=180, cwd=planted)
        assert done.returncode == 0, done.stderr
        gates = [p for p in os.listdir("/proc") if p.isdigit() and f"/run/nestlab/{lab_name}/".encode() in _cmdline(p)]
        assert gates, "the SSH gate runs"
        assert not marker.exists(), marker.read_text()
    finally:
        _destroyed(topo)
    assert not marker.exists(), "a helper imported the working directory's nestlab"
    assert leftovers() == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_symbolic_link_in_the_lab_directory_is_replaced_never_followed(tmp_path, lab_name):
    """A user owning the folder beside the topology plants links where the inventories go: the files they point
    at (root's) keep their text, owner and mode; the inventories are written anew, the folder owner's, 0600."""
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    scratch = []
    folder = home / f"clab-{lab_name}"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    for name in ("ansible-inventory.yml", "nornir-simple-inventory.yml", "topology-data.json"):
        target = tmp_path / f"root-{name}"
        target.write_text("root's own\n")
        target.chmod(0o644)
        (folder / name).symlink_to(target)
        scratch.append(target)
    topo = home / "lab.clab.yml"
    topo.write_text(
        f"name: {lab_name}\ntopology:\n  defaults:\n    credentials: {{username: admin, password: {PASSWORD}}}\n"
        "  nodes:\n    a: {kind: linux}\n"
    )
    os.chown(topo, NOBODY, NOBODY)  # the user's own lab: its lab directory's files are theirs
    try:
        done = run_cli("deploy", "-t", str(topo), timeout=180)
        assert done.returncode == 0, done.stderr
        for target in scratch:
            info = os.stat(target)
            assert target.read_text() == "root's own\n", target
            assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o644), target
        for name in ("ansible-inventory.yml", "nornir-simple-inventory.yml"):
            info = os.lstat(folder / name)
            assert stat.S_ISREG(info.st_mode) and info.st_uid == NOBODY and stat.S_IMODE(info.st_mode) == 0o600, name
            assert PASSWORD in (folder / name).read_text()
        assert stat.S_ISREG(os.lstat(folder / "topology-data.json").st_mode)
        assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []
    finally:
        _destroyed(topo)
    assert leftovers() == []


def _kept_folders() -> set[str]:
    return set(os.listdir(KEPT)) if os.path.isdir(KEPT) else set()


@pytest.mark.parametrize("cleanup", [False, True])
def test_a_topology_from_standard_input_is_roots_alone_and_goes_with_its_lab(tmp_path, lab_name, cleanup):
    text = (
        f"name: {lab_name}\ntopology:\n  defaults:\n    credentials: {{username: admin, password: {PASSWORD}}}\n"
        "  nodes:\n    a: {kind: linux}\n"
    )
    before = _kept_folders()

    def clab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*NESTLAB_P, "clab", *args, "-t", "-"], input=text, capture_output=True, text=True, timeout=180, cwd=ROOT
        )

    made = clab("deploy")
    try:
        assert made.returncode == 0, made.stderr
        (new,) = _kept_folders() - before
        folder = Path(KEPT) / new
        (kept,) = folder.glob("*.clab.yml")
        assert stat.S_IMODE(os.stat(KEPT).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
        assert PASSWORD in kept.read_text()
        gone = clab("destroy", *(["--cleanup"] if cleanup else []))
        assert gone.returncode == 0, gone.stderr
        assert not kept.exists(), "the copy outlives its lab"
        if cleanup:
            assert not folder.exists()
        else:  # the lab directory stays until destroy --cleanup, as containerlab's does
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    finally:
        run_cli("destroy", "--lab", lab_name, timeout=120)
        for name in _kept_folders() - before:  # under the tests' lock: this test's alone
            shutil.rmtree(Path(KEPT) / name, ignore_errors=True)
    assert leftovers() == []


def test_rendered_manifests_are_written_0600(tmp_path):
    topo = tmp_path / "lab.yml"
    topo.write_text(
        "name: rendered\ntopology:\n  defaults:\n    credentials: {username: admin, password: "
        + PASSWORD
        + "}\n  nodes:\n    a: {}\n    b: {}\n    c: {}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n"
        "    - endpoints: [b:eth2, c:eth1]\n"
    )
    out = tmp_path / "k8s.yaml"
    out.write_text("")
    out.chmod(0o644)  # an older file: its mode is set again, not kept
    done = run_cli("k8s", "render", "-t", str(topo), "--servers", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    secret = next(m for m in yaml.safe_load_all(out.read_text()) if m["kind"] == "Secret")  # the shares, passwords too
    assert any(PASSWORD in base64.b64decode(v).decode() for v in secret["data"].values())
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def _nothing_of(lab: str) -> list[str]:
    found = [f"/run/netns/{n}" for n in os.listdir("/run/netns") if lab in n]
    found += [p for p in (f"/etc/ssh/ssh_config.d/clab-{lab}.conf", f"/run/nestlab/{lab}") if os.path.exists(p)]
    found += ["/etc/hosts"] if lab in Path("/etc/hosts").read_text() else []
    return found


@pytest.mark.parametrize(
    ("prefix", "where"),
    [
        ('"p\\nHost *\\nProxyCommand x"', ":2:9:"),
        ('"../../tmp/x"', ":2:9:"),
        ('"*"', ":2:9:"),
        ('"a b"', ":2:9:"),
        ("-p", ":2:9:"),
        (".p", ":2:9:"),
    ],
)
def test_a_prefix_that_is_no_container_name_is_refused_with_its_line(tmp_path, lab_name, prefix, where):
    topo = tmp_path / "lab.clab.yml"
    topo.write_text(f"name: {lab_name}\nprefix: {prefix}\ntopology:\n  nodes:\n    n1: {{kind: linux}}\n")
    done = None
    try:
        done = run_cli("deploy", "-t", str(topo), timeout=120)
        assert done.returncode == 2 and f"{topo}{where}" in done.stderr and "prefix" in done.stderr, done.stderr
        assert _nothing_of(lab_name) == []
        assert not (tmp_path / f"clab-{lab_name}").exists()
    finally:
        if done is not None and done.returncode == 0:
            _destroyed(topo)


@pytest.mark.parametrize("prefix", ["", "__lab-name", "lab_1.x-y"])
def test_containerlabs_prefixes_still_load(tmp_path, lab_name, prefix):
    topo = tmp_path / "lab.clab.yml"
    topo.write_text(f"name: {lab_name}\nprefix: '{prefix}'\ntopology:\n  nodes:\n    n1: {{kind: linux}}\n")
    done = run_cli("validate", "-t", str(topo))
    assert done.returncode == 0, done.stderr


def test_an_identity_file_with_a_backslash_is_refused_with_its_line(tmp_path, lab_name):
    topo = tmp_path / "lab.clab.yml"
    topo.write_text(
        f"name: {lab_name}\ntopology:\n  nodes:\n"
        "    r1: {kind: linux, credentials: {username: bob, identity-file: '/tmp/key\\'}}\n"
    )
    done = None
    try:
        done = run_cli("deploy", "-t", str(topo), timeout=120)
        assert done.returncode == 2 and f"{topo}:4:" in done.stderr and "identity-file" in done.stderr, done.stderr
        assert _nothing_of(lab_name) == []
    finally:
        if done is not None and done.returncode == 0:
            _destroyed(topo)
