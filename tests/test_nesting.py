"""Nested nodes (components), flat mode, cgroup limits, runc / Docker nodes with their own filesystem."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time

import machine
import pytest
from conftest import run_cli
from netcheck import ping

from nestlab.bench import tools

NESTED = """
name: {name}
topology:
  nodes:
    d1:
      components: {gnab: {}, iphy1: {}}
    d2:
      internal_switch: SWITCH
      components: {gnab: {}, iphy1: {}}
    main: {kind: bridge}
  links:
    - endpoints: ["d1/iphy1:eth1", "main:p1"]
      ipv4: ["10.5.0.1/24", null]
    - endpoints: ["d2/iphy1:eth1", "main:p2"]
      ipv4: ["10.5.0.2/24", null]
"""

# Serves once: answers with this component's hostname (tells the two nodes' same-address servers apart).
SERVE_NAME = "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('10.99.0.1', 7000)); s.listen(1); print('ready', flush=True); c,_=s.accept(); c.sendall(socket.gethostname().encode())"
ASK = "import socket; s=socket.create_connection(('10.99.0.1', 7000), timeout=5); print(s.recv(64).decode())"


@pytest.mark.parametrize("switch", ["bridge", "ovs"])
def test_components_meet_on_their_node_and_across_nodes_only_through_declared_links(lab_from, switch):
    lab = lab_from(NESTED.replace("SWITCH", switch))
    n = lab.nodes
    assert ping(n["d1/gnab"], "10.99.0.2")  # d1's internal switch
    assert ping(n["d2/gnab"], "10.99.0.2")  # d2's (bridge or OVS)
    assert ping(n["d1/iphy1"], "10.5.0.2")  # the main switch
    assert not ping(n["d1/gnab"], "10.5.0.2")  # a GNAB has no path to another node
    assert "10.5.0.2" not in n["d2/gnab"].cmd("ip -br addr")


def test_same_address_and_port_on_two_nodes_pid1_and_process_isolation(lab_from):
    lab = lab_from(NESTED.replace("SWITCH", "bridge"))
    servers = [
        lab.nodes[f"{d}/gnab"].popen(["python3", "-c", SERVE_NAME], stdout=subprocess.PIPE, text=True) for d in ("d1", "d2")
    ]
    try:
        for server in servers:
            assert server.stdout.readline().strip() == "ready"  # both bound 10.99.0.1:7000
        answers = [lab.nodes[f"{d}/iphy1"].cmd(["python3", "-c", ASK], check=True).strip() for d in ("d1", "d2")]
        assert answers == ["d1-gnab", "d2-gnab"]
    finally:
        for server in servers:
            server.kill()
            server.wait()
    gnab, iphy = lab.nodes["d1/gnab"], lab.nodes["d1/iphy1"]
    assert "tini" in gnab.cmd("cat /proc/1/cmdline")
    sleeper = iphy.popen(["sleep", "4321"])
    try:
        assert "4321" in iphy.cmd("ps ax")
        assert "4321" not in gnab.cmd("ps ax")  # a sibling's PID namespace is not visible
    finally:
        sleeper.kill()
        sleeper.wait()
    assert gnab.cmd("ipcmk -Q") and "0x" not in iphy.cmd("ipcs -q")  # nor its System V IPC


LIMITED = """
name: {name}
topology:
  nodes:
    d1:
      resources: {NODE}
      components:
        gnab: {resources: GNAB}
        iphy1: {}
"""


def _busy(popen, cpu: int):
    return popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"])


def _available_share(cpu: int, seconds: float = 1.5) -> float:
    """What one unlimited busy loop gets of ``cpu`` right now (below 1 when the hypervisor steals time)."""
    proc = _busy(subprocess.Popen, cpu)
    try:
        time.sleep(0.3)
        start, t0 = tools.cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        return (tools.cpu_seconds(proc.pid) - start) / (time.monotonic() - t0)
    finally:
        proc.kill()
        proc.wait()


def _cpu_share(node, seconds: float = 2.5, loops: dict | None = None) -> tuple[float, float]:
    """Cores used by busy loops (one in ``node``, or ``loops``: node -> count), all pinned to the last CPU,
    read from ``node``'s cgroup CPU counter while they run (their start and exit are outside the window),
    and the share of that CPU the hypervisor left us in the same window."""
    cpu = os.cpu_count() - 1
    procs = [_busy(n.popen, cpu) for n, count in (loops or {node: 1}).items() for _ in range(count)]
    try:
        time.sleep(0.3)  # every loop is running
        start, t0, before = node.usage()["cpu_s"], time.monotonic(), machine.cpu_times(cpu)
        time.sleep(seconds)
        return (node.usage()["cpu_s"] - start) / (time.monotonic() - t0), 1 - machine.stolen_since(before, cpu)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_memory_limit_kills_the_hog_and_spares_its_sibling(lab_from):
    _memory_limit_kills_the_hog(lab_from)


def _memory_limit_kills_the_hog(lab_from):
    lab = lab_from(LIMITED.replace("{NODE}", "{}").replace("GNAB", "{memory: 48m}"))
    gnab, iphy = lab.nodes["d1/gnab"], lab.nodes["d1/iphy1"]
    sibling = iphy.popen(["sleep", "60"])
    try:
        hog = gnab.popen(["python3", "-c", "b = bytearray(256 * 2**20); import time; time.sleep(5)"])
        assert hog.wait(timeout=30) == -9  # SIGKILL from the OOM killer, inside the component's cgroup
        assert sibling.poll() is None
        assert gnab.limits()["memory"] == str(48 * 2**20)
    finally:
        sibling.kill()
        sibling.wait()


@pytest.mark.throughput
def test_cpu_quota_holds_is_changed_live_and_bounds_components(lab_from):
    _cpu_quota_holds(lab_from)


@pytest.mark.throughput
@pytest.mark.kernel("cgroup2")
def test_cgroup_v2_limits_usage_and_cleanup(lab_from):
    """The same limits on a cgroup v2 machine (most users'; here the VM tier's kernel mounts only v2)."""
    _memory_limit_kills_the_hog(lab_from)
    _cpu_quota_holds(lab_from)


def _cpu_quota_holds(lab_from):
    lab = lab_from(LIMITED.replace("{NODE}", "{cpus: 0.8}").replace("GNAB", "{cpus: 0.5}"))
    gnab, node = lab.nodes["d1/gnab"], lab.nodes["d1"]
    # The quota's ceiling is the property and is checked as is.  The floor scales with what a loop can get
    # of that CPU: what one unlimited loop got just before (this VM's host steals 2-15 % of it, more under
    # software emulation in the VM tier), or what the hypervisor left of it while the limited loop ran, if
    # that was less (a loop can lose no more of its quota than that: min(q, 1 - s) >= q(1 - s)).
    before = min(1.0, _available_share(os.cpu_count() - 1) / 0.95)
    share, left = _cpu_share(gnab)
    assert 0.5 * 0.9 * min(before, left) <= share <= 0.55, (share, before, left)
    result = run_cli("node", "set", "--lab", lab.name, "d1/gnab", "--cpus", "0.25")
    assert result.returncode == 0, result.stderr
    share, left = _cpu_share(gnab)
    assert 0.25 * 0.9 * min(before, left) - 0.025 <= share <= 0.3, (share, before, left)
    # The node's 0.8 bounds its components together: two loops in iphy1 and one in gnab.
    used, _ = _cpu_share(node, loops={lab.nodes["d1/iphy1"]: 2, gnab: 1})
    assert used <= 0.88, used
    shown = run_cli("node", "show", "--lab", lab.name, "--format", "json")
    assert '"d1/gnab"' in shown.stdout and '"cpus": "0.25"' in shown.stdout


def test_flat_components_share_the_node_stack(lab_from):
    lab = lab_from(
        """
name: {name}
topology:
  nodes:
    d1:
      nesting: flat
      components: {gnab: {}, iphy1: {}}
    d2: {}
  links:
    - endpoints: ["d1/iphy1:eth1", "d2:eth1"]
      ipv4: ["10.6.0.1/24", "10.6.0.2/24"]
"""
    )
    gnab = lab.nodes["d1/gnab"]
    assert "10.6.0.1/24" in gnab.cmd("ip -br addr")  # the interface declared on iphy1 is the node's
    assert ping(gnab, "10.6.0.2")
    assert "tini" not in gnab.cmd("cat /proc/1/cmdline")  # no PID namespace of its own


def test_flat_interface_names_must_differ_across_components(topo_file):
    path = topo_file(
        """
name: {name}
topology:
  nodes:
    d1: {nesting: flat, components: {a: {}, b: {}}}
    d2: {}
  links:
    - endpoints: ["d1/a:eth1", "d2:eth1"]
    - endpoints: ["d1/b:eth1", "d2:eth2"]
"""
    )
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2
    assert ":9:" in result.stderr and "share one network stack" in result.stderr


@pytest.fixture(scope="session")
def busybox_rootfs(tmp_path_factory):
    """A tiny root filesystem: busybox, its applets, and a marker file the host does not have."""
    root = tmp_path_factory.mktemp("rootfs") / "bb"
    (root / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("busybox"), root / "bin" / "busybox")
    for applet in ("sh", "sleep", "cat", "ls", "ps", "hostname", "ip", "ping", "echo", "mount"):
        (root / "bin" / applet).symlink_to("busybox")
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        (root / d).mkdir()
    (root / "etc" / "marker").write_text("inside the image\n")
    return root


RUNC = """
name: {name}
topology:
  nodes:
    a: {image: IMAGE, resources: {memory: 64m}}
    b: {image: IMAGE}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["10.7.0.1/24", "10.7.0.2/24"]
"""


def _own_filesystem(lab) -> None:
    a, b = lab.nodes["a"], lab.nodes["b"]
    assert a.cmd("cat /etc/marker") == "inside the image\n"
    assert "No such file" in a.cmd("ls /usr/lib/python3")  # the host's files are not there
    a.cmd("echo mine > /etc/written", check=True)
    assert "No such file" in b.cmd("cat /etc/written")  # copy-on-write per node
    assert ping(a, "10.7.0.2")


def test_runc_nodes_run_on_their_own_copy_on_write_filesystem(lab_from, busybox_rootfs):
    lab = lab_from(RUNC.replace("IMAGE", str(busybox_rootfs)))
    _own_filesystem(lab)
    assert not (busybox_rootfs / "etc" / "written").exists()
    assert "memory:/nestlab." in lab.nodes["a"].cmd("cat /proc/self/cgroup")


def test_rootfs_tarball_and_oci_layout_images(lab_from, busybox_rootfs, tmp_path):
    tarball = tmp_path / "bb.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(busybox_rootfs, arcname=".")
    lab = lab_from(RUNC.replace("IMAGE", str(tarball)))
    _own_filesystem(lab)
    lab.destroy()
    layout = tmp_path / "oci"
    for cmd in (
        ["umoci", "init", "--layout", layout],
        ["umoci", "new", "--image", f"{layout}:bb"],
        ["umoci", "insert", "--image", f"{layout}:bb", busybox_rootfs, "/"],
    ):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)
    _own_filesystem(lab_from(RUNC.replace("IMAGE", str(layout))))


def test_bad_image_is_refused_with_its_line(topo_file):
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {image: ./nowhere/rootfs}\n")
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and ":4:" in result.stderr and "does not exist" in result.stderr
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {image: alpine:3}\n")
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 0 and "runtime: docker" in result.stderr  # containerlab style: a note, not an error
    run_cli("destroy", "-t", str(path))


@pytest.fixture(scope="session")
def docker_engine(busybox_rootfs, tmp_path_factory):
    """A Docker engine of the suite's own (own socket and data root; no iptables rules, no bridge, and
    ip_forward left alone, so the machine is as it was) with a busybox image."""
    run = tmp_path_factory.mktemp("docker")
    sock = f"unix://{run}/docker.sock"
    daemon = subprocess.Popen(
        [
            "dockerd",
            "--host",
            sock,
            "--data-root",
            str(run / "data"),
            "--exec-root",
            str(run / "exec"),
            "--pidfile",
            str(run / "pid"),
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--bridge=none",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(run / "dockerd.log", "w"),
    )
    os.environ["DOCKER_HOST"] = sock
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["docker", "version"], capture_output=True).returncode:
            assert daemon.poll() is None and time.monotonic() < deadline, (run / "dockerd.log").read_text()[-2000:]
            time.sleep(0.5)
        tar = subprocess.run(["tar", "-C", str(busybox_rootfs), "-c", "."], capture_output=True, check=True).stdout
        subprocess.run(["docker", "import", "-", "nestlab-test-bb:1"], input=tar, capture_output=True, check=True)
        yield "nestlab-test-bb:1"
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        del os.environ["DOCKER_HOST"]
        subprocess.run(["umount", "-R", str(run / "exec")], capture_output=True)
        shutil.rmtree(run, ignore_errors=True)


def test_docker_nodes_are_wired_like_any_node(lab_from, docker_engine):
    lab = lab_from(RUNC.replace("{image: IMAGE", "{runtime: docker, image: IMAGE").replace("IMAGE", docker_engine))
    _own_filesystem(lab)
    assert "memory:/nestlab." in lab.nodes["a"].cmd("cat /proc/self/cgroup")
    name = f"nestlab.{lab.name}.a"
    lab.destroy()
    assert subprocess.run(["docker", "inspect", name], capture_output=True).returncode != 0


def test_image_build_with_debootstrap(lab_from):
    name = "nestlab-test-base"
    run_cli("image", "rm", name)
    try:
        result = run_cli("image", "build", name, "--debian", "bookworm", "--packages", "iproute2", timeout=1200)
        assert result.returncode == 0, result.stderr[-3000:]
        assert name in run_cli("image", "ls").stdout
        lab = lab_from(f"name: {{name}}\ntopology:\n  nodes:\n    a: {{image: {name}}}\n")
        node = lab.nodes["a"]
        assert node.cmd("cat /etc/debian_version").startswith("12.")
        assert "iproute2" in node.cmd("ip -V")
    finally:
        run_cli("image", "rm", name)
