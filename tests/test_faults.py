"""Resource faults: a full disk under the labs' folder, the kernel's namespace limit reached, a
missing tool: each a clear error (exit 1, no traceback), what already ran is kept, nothing stranded."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import NESTLAB, ROOT, leftovers, run_cli, star

from nestlab import Lab, names
from nestlab.backends.kernel import libc
from nestlab.errors import LabError


@contextlib.contextmanager
def small_disk() -> Iterator[str]:
    """A 1 MiB tmpfs over the labs' folder (no lab of ours is live: the suite checks); yields a filler path."""
    os.makedirs(names.STATE_ROOT, exist_ok=True)
    libc.mount("tmpfs", names.STATE_ROOT, 0, "tmpfs", "size=1m,mode=755")
    try:
        yield os.path.join(names.STATE_ROOT, ".filler")
    finally:
        libc.umount(names.STATE_ROOT)


def fill(path: str) -> None:
    with open(path, "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 4096)


def _refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and all(w in result.stderr for w in words), result.stderr


def test_full_disk_refuses_a_deploy_and_keeps_a_running_lab(topo_file, lab_name):
    small, big = topo_file(star(lab_name, 3), "small.yml"), topo_file(star(lab_name, 12), "big.yml")
    with small_disk() as filler:
        fill(filler)
        _refused(run_cli("deploy", "-t", str(small)), "No space left")
        assert leftovers() == [], "a refused deploy leaves nothing, not even its folder"
        os.remove(filler)
        assert run_cli("deploy", "-t", str(small)).returncode == 0
        fill(filler)
        _refused(run_cli("deploy", "-t", str(big)), "No space left")
        shown = run_cli("inspect", "--lab", lab_name, "--format", "json")
        assert shown.returncode == 0 and '"h11"' not in shown.stdout and '"h2"' in shown.stdout, "the lab as it ran before"
        far = Lab.running(lab_name).nodes["h2"].intf("eth1").ip
        ping = run_cli("exec", "--lab", lab_name, "h0", "--", "ping", "-c1", "-W2", far)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert run_cli("destroy", "--lab", lab_name).returncode == 0, "destroy needs no space"
        os.remove(filler)
    assert leftovers() == []


def _netns_in_use() -> int:
    """Network namespaces alive now: held by a process or pinned by a mount."""
    found = set()
    for path in glob.glob("/proc/[0-9]*/ns/net"):
        with contextlib.suppress(OSError):
            found.add(os.stat(path).st_ino)
    with open("/proc/self/mountinfo") as fh:
        found |= {line.split()[4] for line in fh if line.split()[8] == "nsfs"}
    return len(found)


@pytest.mark.kernel("user-limits")
def test_namespace_limit_is_a_clear_error_and_nothing_is_left(topo_file, lab_name):
    path = topo_file(star(lab_name, 40))
    limit_file = "/proc/sys/user/max_net_namespaces"
    with open(limit_file) as fh:
        old = fh.read().strip()
    try:
        with open(limit_file, "w") as fh:
            fh.write(str(_netns_in_use() + 5))
        _refused(run_cli("deploy", "-t", str(path)), "user.max_net_namespaces", "sysctl -w")
        assert leftovers() == []
    finally:
        with open(limit_file, "w") as fh:
            fh.write(old)
    assert run_cli("deploy", "-t", str(path)).returncode == 0, "the same lab deploys once the limit allows it"


def test_a_missing_tool_is_named(topo_file, tmp_path, lab_name):
    """iperf3 gone from PATH: the bench names it and its package; the lab stays as it was."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for entry in os.scandir(folder):
            if entry.name != "iperf3" and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry.path)
    assert run_cli("deploy", "-t", str(topo_file(star(lab_name, 2)))).returncode == 0
    env = {**os.environ, "PATH": str(bin_dir)}
    result = subprocess.run(
        [*NESTLAB, "bench", "run", "--lab", lab_name, "--from", "h0", "--to", "h1", "--duration", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    _refused(result, "iperf3", "apt")
    assert shutil.which("iperf3"), "the test removed iperf3 from its own PATH only"
    assert "1 received" in Lab.running(lab_name).nodes["h0"].cmd(
        f"ping -c1 -W2 {Lab.running(lab_name).nodes['h1'].intf('eth1').ip}"
    )
    assert run_cli("destroy", "--lab", lab_name).returncode == 0


def test_a_low_open_file_limit_is_raised_or_named_before_anything_is_made(topo_file, lab_name):
    """100 nodes need more than 64 fds (a namespace and a netlink socket each): nestlab raises its
    own limit where root may; where it may not (a container), it says so before making anything."""
    path = topo_file(star(lab_name, 100))
    low = ["prlimit", "--nofile=64"]
    may_raise = (
        subprocess.run(
            [*low, sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))"]
        ).returncode
        == 0
    )
    result = subprocess.run([*low, *NESTLAB, "deploy", "-t", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    if may_raise:
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert run_cli("destroy", "-t", str(path)).returncode == 0
    else:
        _refused(result, "open files and the limit is 64", "ulimit -n")
    assert leftovers() == []


def test_bench_results_on_a_full_disk_keep_what_finished(tmp_path):
    """A suite writing to a 64 KiB tmpfs: stopped with a clear error when it fills, the lab gone,
    and results.json holding every measurement finished before."""
    from nestlab.bench import results, scenario
    from nestlab.bench.suite import Suite

    def build(cell) -> Lab:
        lab = Lab(f"fz{os.getpid()}")
        lab.add_node("a")
        lab.add_node("b")
        lab.add_link("a:eth1", "b:eth1")
        return lab

    def measure(lab, cell, duration, recorder):
        out = lab.nodes["a"].cmd(f"ping -c1 -W1 {lab.nodes['b'].intf('eth1').ip}")
        recorder.raw(f"ping-{cell['n']}", ["ping"], out + "x" * 6000)  # raw output fills the disk in a few cells
        return [{"pair": "a-b", "received": int("1 received" in out)}]

    suite = Suite("fz", "fuzz", "none", {"n": list(range(40))}, {"n": [0]}, 1, 1, 1.0, 1.0, build, lambda cell: (), measure, [])
    disk = tmp_path / "disk"
    disk.mkdir()
    libc.mount("tmpfs", str(disk), 0, "tmpfs", "size=64k")
    try:
        with pytest.raises(LabError, match="is full: stopped after"):
            scenario.run(suite, disk / "out")
        meta, rows = results.load(disk / "out")
        assert meta["interrupted"] and 1 <= len(rows) < 40 and all(r["received"] == 1 for r in rows)
    finally:
        libc.umount(str(disk))
    assert leftovers() == []
