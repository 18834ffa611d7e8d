"""Ownership: destroy/cleanup remove exactly what is marked as the lab's; failures and kills leave nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest
from conftest import NESTLAB, ROOT, leftovers, root_links, run_cli, star

from nestlab import Lab, LabError
from nestlab.engine import cleanup


@pytest.fixture
def foreign():
    """A namespace, a veth in the root namespace and a look-alike namespace file that are not ours."""
    tag = uuid.uuid4().hex[:6]
    ns, veth = f"foreign-{tag}", f"fgn{tag}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", f"fgp{tag}"], check=True)
    yield ns, veth
    subprocess.run(["ip", "netns", "del", ns], check=False)
    subprocess.run(["ip", "link", "del", veth], check=False)


def _foreign_alive(ns: str, veth: str) -> bool:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return ns in names and veth in root_links()


def test_destroy_and_cleanup_touch_only_their_own(foreign, lab_name):
    ns, veth = foreign
    other = f"{lab_name}x"
    mine, theirs = Lab(lab_name), Lab(other)
    for lab in (mine, theirs):
        lab.add_node("a")
        lab.add_node("b")
        lab.add_link("a:eth1", "b:eth1")
        lab.deploy()
    try:
        sleeper = mine.nodes["a"].popen(["sleep", "300"])
        assert run_cli("cleanup", lab_name).returncode == 0
        assert sleeper.wait(timeout=5) == -signal.SIGTERM  # processes inside the lab are stopped
        assert cleanup.marked_namespaces(lab_name) == []
        assert len(cleanup.marked_namespaces(other)) == 2, "another lab must survive cleanup of this one"
        assert "1 received" in theirs.nodes["a"].cmd(f"ping -c1 -W1 {theirs.nodes['b'].intf('eth1').ip}")
        assert _foreign_alive(ns, veth)
        assert run_cli("cleanup", "--all").returncode == 0
        assert leftovers() == [] and _foreign_alive(ns, veth)
    finally:
        mine.destroy()
        theirs.destroy()


def test_failed_deploy_rolls_back(topo_file, lab_name):
    bad = "    h7b: {sysctls: {net.ipv4.no_such_knob: 1}}\n"
    path = topo_file(star(lab_name, 10, extra=bad))
    before = root_links()
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 1
    assert "sysctl net.ipv4.no_such_knob does not exist" in result.stderr
    assert leftovers() == [] and root_links() == before


def test_failed_reconcile_keeps_the_running_lab(lab_name):
    lab = Lab(lab_name)
    lab.add_node("a")
    lab.add_node("b")
    lab.add_link("a:eth1", "b:eth1")
    with lab.deployed():
        lab.add_node("c", sysctls={"net.ipv4.no_such_knob": 1})
        lab.add_link("a:eth2", "c:eth1")
        with pytest.raises(LabError, match="no_such_knob"):
            lab.deploy()
        assert sorted(os.path.basename(p) for p in cleanup.marked_namespaces(lab_name)) == [
            f"nestlab.{lab_name}.a",
            f"nestlab.{lab_name}.b",
        ]
        assert "1 received" in lab.nodes["a"].cmd(f"ping -c1 -W1 {lab.nodes['b'].intf('eth1').ip}")


def test_kill_9_mid_deploy_then_cleanup_all(foreign, topo_file, lab_name):
    ns, veth = foreign
    path = topo_file(star(lab_name, 400))
    proc = subprocess.Popen([*NESTLAB, "deploy", "-t", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(cleanup.marked_namespaces(lab_name)) < 50:
        assert proc.poll() is None, f"deploy ended before it could be killed: {proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    made = len(cleanup.marked_namespaces(lab_name))
    assert 50 <= made < 401, "the kill must land mid-way"
    again = run_cli("deploy", "-t", str(path))
    assert again.returncode == 1 and f"nestlab cleanup {lab_name}" in again.stderr
    result = run_cli("cleanup", "--all")
    assert result.returncode == 0, result.stderr
    assert leftovers() == []
    assert _foreign_alive(ns, veth)


@pytest.mark.slow
def test_fifty_cycles_leave_nothing_and_leak_no_fds(topo_file, lab_name):
    lab = Lab.from_file(topo_file(star(lab_name, 19)))
    fds = None
    for cycle in range(50):
        with lab.deployed():
            if cycle in (0, 49):
                assert "1 received" in lab.nodes["h0"].cmd(f"ping -c1 -W1 {lab.nodes['h18'].intf('eth1').ip}")
        assert leftovers() == []
        if cycle == 1:
            fds = len(os.listdir("/proc/self/fd"))
    assert len(os.listdir("/proc/self/fd")) == fds


def test_cleanup_needs_a_target():
    result = subprocess.run([*NESTLAB, "cleanup"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and "name one lab, or pass --all" in result.stderr


def test_cleanup_kills_a_tool_left_working_on_the_labs_folder(topo_file, lab_name):
    """A tool a killed deploy left running on the lab's folder (an ovs-vsctl waits up to 30 s for its switch) goes
    with the lab; one working on another folder does not."""
    assert run_cli("deploy", "-t", str(topo_file(star(lab_name, 2)))).returncode == 0
    folder = os.path.join("/run/nestlab", lab_name)
    ours = subprocess.Popen(["sh", "-c", "sleep 60", f"{folder}/ovs/sw/db.sock"])
    theirs = subprocess.Popen(["sh", "-c", "sleep 60", f"{folder}-not-ours/db.sock"])
    try:
        assert run_cli("cleanup", lab_name).returncode == 0
        assert ours.wait(timeout=5) == -signal.SIGKILL
        assert theirs.poll() is None
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()


def test_destroy_larger_than_the_open_file_limit(topo_file, lab_name):
    """Destroy holds the lab's network namespaces open until all are unpinned (so the kernel dismantles
    them together); with fewer files allowed than the lab has namespaces it does so a batch at a time,
    and still everything goes."""
    path = topo_file(star("{name}", 150))
    assert run_cli("deploy", "-t", str(path)).returncode == 0
    assert len(cleanup.marked_namespaces(lab_name)) == 151
    limited = "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160)); "
    script = limited + f"from nestlab import sites; print(sites.remove({lab_name!r}))"
    done = subprocess.run([*NESTLAB[:1], "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["151"], done.stderr
    assert leftovers() == []
