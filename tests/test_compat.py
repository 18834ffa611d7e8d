"""containerlab's own forms: groups, cpu/memory, stages with wait-for, cmd, healthchecks, host: and mgmt-net:
endpoints, the extended link form; containerlab's smoke topologies run unchanged; bad input is refused whole."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import NESTLAB, ROOT, processes, root_links, run_cli

from nestlab import Lab, names
from nestlab.backends.kernel import cgroups
from nestlab.engine import cleanup, state

SMOKE = ROOT / "tests" / "fixtures" / "clab-smoke"
FORMS = ROOT / "tests" / "fixtures" / "clab-forms"

SHAPES = """
name: {name}
topology:
  groups:
    small: {cpu: 0.5, memory: 64Mb, labels: {role: edge}}
  nodes:
    a:
      group: small
      cmd: sh -c "echo started >> STAMP/a.cmd; exec sleep 600"
      stages:
        configure:
          wait-for: [{node: b, stage: healthy}]
          exec: [{command: "date +%s%N > STAMP/a.configure", phase: on-enter}]
    b:
      startup-delay: 1
      exec: ["sh -c 'sleep 0.5; date +%s%N > STAMP/b.ready'"]
      healthcheck: {test: [CMD-SHELL, "test -f STAMP/b.ready"], interval: 0.2, retries: 20}
    c: {}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["10.9.0.1/24", "10.9.0.2/24"]
    - endpoints: ["a:eth2", "host:HOSTIF"]
      ipv4: ["10.9.1.1/24", null]
    - type: veth
      endpoints: [{node: b, interface: eth2}, {node: c, interface: eth2, mac: "02:00:00:00:00:01"}]
      ipv4: ["10.9.2.2/24", "10.9.2.3/24"]
    - endpoints: ["c:eth1", "mgmt-net:c-eth1"]
      ipv4: ["10.9.9.3/24", null]
    - endpoints: ["a:eth3", "mgmt-net:a-eth3"]
      ipv4: ["10.9.9.1/24", null]
"""


def test_containerlab_shapes_deploy_wait_connect_and_leave_nothing(topo_file, tmp_path, lab_name):
    host_if = "nl" + lab_name[1:9]
    lab = Lab.from_file(topo_file(SHAPES.replace("STAMP", str(tmp_path)).replace("HOSTIF", host_if)))
    started = time.monotonic()
    lab.deploy()
    try:
        took = time.monotonic() - started
        # Stages: a configures only once b is healthy (b waits 1 s, then its exec takes 0.5 s).
        assert int((tmp_path / "a.configure").read_text()) > int((tmp_path / "b.ready").read_text())
        assert took >= 1.5, took
        assert _started(tmp_path / "a.cmd", 1) == "started\n", "cmd runs beside the deploy"
        assert "sleep 600" in lab.nodes["a"].cmd("ps -eo args"), "cmd keeps running"
        # Restarted on request: the old session ends, the new one runs the same cmd.
        pid_file = os.path.join(names.node_dir(lab.name, "a"), "cmd.pid")
        old = int(open(pid_file).read().split()[0])
        restarted = run_cli("node", "restart", "--lab", lab.name, "a", "--cmd")
        assert restarted.returncode == 0, restarted.stderr
        new = int(open(pid_file).read().split()[0])
        assert new != old and not _alive(old) and _alive(new)
        assert _started(tmp_path / "a.cmd", 2) == "started\nstarted\n"
        refused = run_cli("node", "restart", "--lab", lab.name, "c", "--cmd")
        assert refused.returncode == 1 and "has no cmd" in refused.stderr, refused.stderr
        # groups + cpu/memory: the group's limits reach the node's cgroup.
        limits = cgroups.Tree(lab.name).limits("a")
        assert limits["cpus"] == "0.5" and limits["memory"] == str(64 << 20), limits
        assert "1 received" in lab.nodes["a"].cmd("ping -c1 -W1 10.9.0.2")
        assert "1 received" in lab.nodes["c"].cmd("ping -c1 -W1 10.9.2.2"), "the extended veth form"
        assert "link/ether 02:00:00:00:00:01 " in lab.nodes["c"].cmd("ip link show eth2"), "its endpoint's mac:"
        assert "1 received" in lab.nodes["c"].cmd("ping -c1 -W1 10.9.9.1"), "both on the lab's management bridge"
        # host:IF is a veth end in this machine's namespace, up, and it reaches the node.
        assert host_if in root_links()
        subprocess.run(["ip", "addr", "add", "10.9.1.2/24", "dev", host_if], check=True)
        assert subprocess.run(["ping", "-c1", "-W1", "10.9.1.1"], capture_output=True).returncode == 0
        assert lab.nodes["c"].cmd("cat /proc/net/dev").count("eth") == 2
    finally:
        lab.destroy()
    assert host_if not in root_links(), "the host's end went with the lab"


def _started(path: Path, times: int) -> str:
    """The file a node's cmd appends to, once it holds `times` whole lines (the shell creates it before it writes)."""
    deadline = time.monotonic() + 10
    while True:
        text = path.read_text() if path.exists() else ""
        if text.count("\n") >= times or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """A process that runs (a zombie waiting for its parent does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def test_containerlab_smoke_topologies_run_unchanged(tmp_path):
    """containerlab's tests/01-smoke: stages (wait-for across four nodes, host exec, healthcheck), a bridge and
    host: endpoints, mgmt-net: (a port of the management bridge), empty node entries, startup-delay; and
    tests/08-vxlan/vxlan-stitch-linux (l1 reaches l2 through a VXLAN stitch to l2's management address)."""
    made = [p for p in ("/tmp/host-exec-test", "/tmp/time") if not os.path.exists(p)]
    labs = {
        "01-linux-nodes": "2-linux-nodes",
        "24-basic-groups": "2-linux-nodes",
        "stages": "stages",
        "03-linux-nodes-to-bridge-and-host": "03-bridge-and-host",
        "16-mgmtnetinterface": "mgmtnetif",
        "node-filter": "node-filter",
        "stages-race": "stages-race",
        "vxlan-stitch-linux": "vxlan-stitch-linux",
    }
    for name, lab in labs.items():
        folder = tmp_path / name
        folder.mkdir()
        file = next(SMOKE.glob(f"{name}.clab.y*ml"))
        for each in (file, SMOKE / "01-test.txt", SMOKE / "01-test.json"):
            shutil.copy(each, folder)
        before = root_links()
        result = run_cli("deploy", "-t", str(folder / file.name), timeout=120)
        try:
            assert result.returncode == 0, result.stderr
            assert lab in state.labs()
            if name == "stages":
                out = result.stdout + result.stderr
                # node4 exits create-links (uname) before it is healthy; node3 exits create only after node4 is healthy.
                assert (
                    out.index("exec node4: uname -n")
                    < out.index("hey I am exiting healthy stage")
                    < out.index("exec node3: ls /sys/class/net/")
                )
                assert "exec node1 (on the host): bash -c 'echo foo > /tmp/host-exec-test' (exit 0)" in out
                assert Path("/tmp/host-exec-test").read_text() == "foo\n"
                assert "n3eth1" in root_links()
            if name == "03-linux-nodes-to-bridge-and-host":
                assert "l1-01-03-eth3" in root_links()
            if name == "01-linux-nodes":  # type: mgmt-net's endpoint mac: is the node end's, as containerlab gives it
                l2 = run_cli("exec", "--lab", lab, "l2", "--", "ip", "link", "show", "eth5").stdout
                assert "link/ether 02:00:00:00:00:05 " in l2, l2
                shown = subprocess.run(["ip", "link", "show", "dev", "l2eth5mgmt"], capture_output=True, text=True).stdout
                assert "master br-clab" in shown, shown
                l1 = run_cli("exec", "--lab", lab, "l1", "--", "cat", "/01-test.txt").stdout
                assert l1 == (SMOKE / "01-test.txt").read_text(), l1
            if name == "stages-race":
                assert "exec l1: ip l show dev eth1 (exit 0)" in result.stdout + result.stderr
            if name == "16-mgmtnetinterface":  # a port of the management bridge, up, its end here named l1eth1
                shown = subprocess.run(["ip", "link", "show", "dev", "l1eth1"], capture_output=True, text=True).stdout
                assert "state UP" in shown and "master br-clab" in shown, shown
            if name == "vxlan-stitch-linux":  # l1's eth1 tunnelled to l2's vxlan0 through their management addresses
                for node, far in (("l1", "10.0.0.2"), ("l2", "10.0.0.1")):
                    ping = run_cli("exec", "--lab", lab, node, "--", "ping", "-c2", "-W2", far)
                    assert "2 received" in ping.stdout, ping.stdout + ping.stderr
        finally:
            gone = run_cli("destroy", "--lab", lab)
        assert gone.returncode == 0, gone.stderr
        assert root_links() <= before, root_links() - before
    for path in made:
        Path(path).unlink(missing_ok=True)


BAD = {
    "a wait-for circle": (
        """
name: {name}
topology:
  nodes:
    a: {stages: {configure: {wait-for: [{node: b, stage: configure}]}}}
    b:
      stages:
        create:
          wait-for: [{node: a, stage: healthy}]
""",
        ":5:",
        "circle",
    ),
    "a wait-for on a missing node": (
        """
name: {name}
topology:
  nodes:
    a: {stages: {create: {wait-for: [{node: zz}]}}}
""",
        ":5:",
        "node 'zz'",
    ),
    "an unknown stage": (
        """
name: {name}
topology:
  nodes:
    a: {stages: {boot: {}}}
""",
        ":5:",
        "create-links",
    ),
    "a Go template beyond the subset": (
        """
name: {name}
topology:
  nodes:
    a: {kind: {{ template "kind" }}}
""",
        ":5:",
        "render the file with containerlab",
    ),
    "a macvlan endpoint on an interface the machine lacks": (
        """
name: {name}
topology:
  nodes: {a: {}}
  links: [{endpoints: ["a:eth1", "macvlan:${NESTLAB_NO_SUCH_VAR:=nlt-nosuchif}"]}]
""",
        ":5:",
        "this machine has no interface nlt-nosuchif",
    ),
    "a macvlan endpoint the file forbids": (
        """
name: {name}
allow_host_interfaces: false
topology:
  nodes: {a: {}}
  links: [{endpoints: ["a:eth1", "macvlan:lo"]}]
""",
        ":6:",
        "allow_host_interfaces: false",
    ),
    "a bridge inside a node that is not there": (
        """
name: {name}
topology:
  nodes:
    br0|zz: {kind: bridge}
""",
        ":5:",
        "needs kind: bridge and a node 'zz'",
    ),
    "a multicast MAC": (
        """
name: {name}
topology:
  nodes: {a: {}, b: {}}
  links: [{type: veth, endpoints: [{node: a, interface: eth1, mac: "01:00:5e:00:00:01"}, {node: b, interface: eth1}]}]
""",
        ":5:",
        "not a unicast MAC",
    ),
    "a type: vxlan link without its vni": (
        """
name: {name}
topology:
  nodes: {a: {}}
  links: [{type: vxlan, endpoint: {node: a, interface: eth1}, remote: 10.0.0.9}]
""",
        ":5:",
        "needs vni",
    ),
    "an unknown link type": (
        """
name: {name}
topology:
  nodes: {a: {}}
  links: [{type: gretap, endpoint: {node: a, interface: eth1}, remote: 10.0.0.9}]
""",
        ":5:",
        "not supported",
    ),
    "a port on the machine's real address": (
        """
name: {name}
allow_host_ports: true
topology:
  nodes: {a: {ports: ["0.0.0.0:8080:80"]}}
""",
        ":5:",
        "loopback only",
    ),
    "a host port forwarded twice": (
        """
name: {name}
allow_host_ports: true
topology:
  nodes:
    a: {ports: ["18080:80"]}
    b: {ports: ["18080:81"]}
""",
        ":7:",
        "already forwarded to a",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_containerlab_input_is_refused_with_its_line(case, topo_file):
    text, where, what = BAD[case]
    path = topo_file(text)
    before = root_links()
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{path.name}{where}" in result.stderr and what in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and root_links() == before


PORTS = """
name: {name}
allow_host_ports: true
topology:
  nodes:
    web:
      cmd: python3 -m http.server 80 --bind 127.0.0.1 --directory DIR
      ports: ["HTTP:80", "127.0.0.1:UDP:53/udp"]
"""


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ports_forward_loopback_to_the_node_only_when_allowed(topo_file, tmp_path, lab_name):
    (tmp_path / "index.html").write_text("served by the node\n")
    http, udp = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
    text = PORTS.replace("DIR", str(tmp_path)).replace("HTTP", str(http)).replace("UDP", str(udp))
    lab = Lab.from_file(topo_file(text))
    lab.deploy()
    try:
        # TCP: this machine's 127.0.0.1:http reaches the node's own loopback, where its cmd serves.
        deadline, body = time.monotonic() + 10, None
        while body is None and time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{http}/index.html", timeout=2).read()
            except OSError:
                time.sleep(0.2)
        assert body == b"served by the node\n"
        # UDP: a datagram to 127.0.0.1:udp reaches a server on the node's port 53 and its answer comes back.
        server = lab.nodes["web"].popen(
            [
                "python3",
                "-c",
                "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                "s.bind(('127.0.0.1', 53)); print('ready', flush=True); d, a = s.recvfrom(99); s.sendto(d.upper(), a)",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout.readline() == "ready\n"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            sock.sendto(b"query", ("127.0.0.1", udp))
            assert sock.recvfrom(99)[0] == b"QUERY"
        server.wait(timeout=5)
        # Only loopback: the machine's other addresses do not listen.
        assert f"127.0.0.1:{http}" in subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
        # The same port again: a clear error, and the second lab leaves nothing.
        clash = topo_file(text.replace("name: {name}", "name: {name}b"), "clash.yml")
        result = run_cli("deploy", "-t", str(clash))
        assert result.returncode == 1 and f"127.0.0.1:{http}/tcp" in result.stderr and "in use" in result.stderr, result.stderr
        assert f"{lab.name}b" not in state.labs() and not cleanup.marked_namespaces(f"{lab.name}b")
    finally:
        from nestlab.sites import remove

        lab.destroy()
        remove(f"{lab.name}b")
    assert f":{http} " not in subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout, (
        "the forwarder went with the lab"
    )
    # Without allow_host_ports, ports: is a note and nothing listens.
    quiet = topo_file(text.replace("allow_host_ports: true", ""), "quiet.yml")
    result = run_cli("deploy", "-t", str(quiet))
    try:
        assert result.returncode == 0 and "ports are forwarded from this machine only with allow_host_ports" in result.stderr
        assert f":{http} " not in subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
    finally:
        run_cli("destroy", "--lab", lab.name)


KATHARA = {
    "lab.conf": 'LAB_DESCRIPTION="two FRR routers with static routes between two LANs"\n\n'
    'r1[0]="A"\nr1[1]="B"\nr1[image]="kathara/frr"\n\nr2[0]="B"\nr2[1]="C"\nr2[image]="kathara/frr"\n\n'
    'pc1[0]="A"\npc1[image]="kathara/base"\npc1[ipv6]="false"\npc3[0]="A"\npc2[0]="C"\n',
    "r1.startup": "ip address add 10.1.0.1/24 dev eth0\nip address add 10.2.0.1/24 dev eth1\nsystemctl start frr\n",
    "r2.startup": "ip address add 10.2.0.2/24 dev eth0\nip address add 10.3.0.1/24 dev eth1\nsystemctl start frr\n",
    "pc1.startup": "ip address add 10.1.0.10/24 dev eth0\nip route add default via 10.1.0.1\n",
    "pc3.startup": "ip address add 10.1.0.30/24 dev eth0\n",
    "pc2.startup": "ip address add 10.3.0.10/24 dev eth0\nip route add default via 10.3.0.1\n",
    "r1/etc/frr/frr.conf": "hostname r1\nip route 10.3.0.0/24 10.2.0.2\n",
    "r2/etc/frr/frr.conf": "hostname r2\nip route 10.1.0.0/24 10.2.0.1\n",
    "pc1/tmp/hello.txt": "from pc1's folder\n",
    "pc1/var/www/nestlab-site/index.html": "not on this machine\n",
}


@pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")
def test_kathara_lab_runs_from_its_folder(tmp_path):
    folder = tmp_path / "kathara-static"
    for rel, text in KATHARA.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    result = run_cli("deploy", "-t", str(folder), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        assert "lab.conf:3:1: r1: ignored: r1.startup: `systemctl start frr`: nestlab starts the router" in result.stderr
        assert "[ipv6]" in result.stderr
        lab = Lab.running("kathara-static")
        assert lab.plan.nodes["cd-A"].kind == "bridge", "collision domain A has three devices: a bridge"
        assert "cd-B" not in lab.plan.nodes, "B joins two devices: a veth pair"
        # Static routes from each router's own etc/frr/frr.conf carry pc1's ping across both routers.
        deadline = time.monotonic() + 30
        while "1 received" not in (out := lab.nodes["pc1"].cmd("ping -c1 -W1 10.3.0.10")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "1 received" in out, lab.nodes["r1"].cmd("vtysh -c 'show ip route'")
        assert "1 received" in lab.nodes["pc3"].cmd("ping -c1 -W1 10.1.0.10")
        assert lab.nodes["pc1"].cmd("cat /tmp/hello.txt") == "from pc1's folder\n"
        assert "hello.txt" not in lab.nodes["pc3"].cmd("ls /tmp"), "a device's folder is its own"
        assert lab.nodes["pc1"].cmd("cat /var/www/nestlab-site/index.html") == "not on this machine\n", (
            "a path the machine lacks is the device's"
        )
        assert not os.path.exists("/var/www/nestlab-site")
    finally:
        run_cli("destroy", "--lab", "kathara-static")


WEB = {
    "lab.conf": 'client[0]=A\nclient[image]="kathara/base"\nclient[sysctl]="net.ipv6.conf.eth0.accept_ra=2"\n'
    'server[0]=A\nserver[image]="kathara/base"\n',
    "server.startup": "ip address add 10.0.0.1/24 dev eth0\nsystemctl start apache2\n",
    "client.startup": "ip address add 10.0.0.2/24 dev eth0\n",
    "server/var/www/html/index.html": "<html>Hello from the lab!</html>\n",
}


@pytest.mark.skipif(not shutil.which("apache2ctl"), reason="needs Debian's apache2 package (make deps installs it)")
def test_katharas_commands_start_a_web_server_lab_and_clean_it(tmp_path):
    """lstart/exec/linfo/list/lclean on a lab shaped like Kathará's web-server teaching lab: the server's
    startup starts apache2, which serves the lab's own index.html; nothing is left after lclean."""
    folder = tmp_path / "web"
    for rel, text in WEB.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    started = run_cli("kathara", "lstart", "-d", str(folder), "--noterminals", timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        assert "`systemctl start apache2` runs `" in started.stderr, started.stderr
        deadline, page = time.monotonic() + 20, ""
        while "Hello from the lab!" not in page and time.monotonic() < deadline:
            page = run_cli("kathara", "exec", "-d", str(folder), "client", "--", "curl", "-s", "-m2", "10.0.0.1").stdout
            time.sleep(0.3)
        assert "Hello from the lab!" in page, page
        listed = run_cli("kathara", "list", "-d", str(folder)).stdout
        assert "client" in listed and "server" in listed and "cd-A" not in listed, listed
        assert "10.0.0.1/24" in run_cli("kathara", "linfo", "-d", str(folder), "-n", "server").stdout
        ra = run_cli("kathara", "exec", "-d", str(folder), "client", "--", "sysctl", "-n", "net.ipv6.conf.eth0.accept_ra").stdout
        assert ra.strip() == "2", "an interface's sysctl, set once the interface exists"
    finally:
        cleaned = run_cli("kathara", "lclean", "-d", str(folder))
    assert cleaned.returncode == 0 and "removed 2 devices" in cleaned.stderr, cleaned.stderr
    assert not cleanup.left("web")


def test_kathara_vstart_devices_meet_on_a_collision_domain():
    try:
        for device, eth in (("pc1", "0:A"), ("pc2", "0:A")):
            assert run_cli("kathara", "vstart", "-n", device, "--eth", eth, "--noterminals").returncode == 0
        run_cli("kathara", "exec", "-v", "pc1", "--", "ip", "addr", "add", "10.7.0.1/24", "dev", "eth0", check=True)
        run_cli("kathara", "exec", "-v", "pc2", "--", "ip", "addr", "add", "10.7.0.2/24", "dev", "eth0", check=True)
        assert "1 received" in run_cli("kathara", "exec", "-v", "pc1", "--", "ping", "-c1", "-W2", "10.7.0.2").stdout
        assert run_cli("kathara", "vclean", "-n", "pc2").returncode == 0
        assert "pc2" not in run_cli("kathara", "list", "-a").stdout
    finally:
        run_cli("kathara", "vclean", "-n", "pc1")
        run_cli("kathara", "vclean", "-n", "pc2")
    assert not cleanup.left("kathara-vlab")


def test_bad_kathara_line_is_refused_with_its_line(tmp_path):
    (tmp_path / "lab.conf").write_text('r1[0]="A"\nr1 0 = B\n')
    before = root_links()
    result = run_cli("deploy", "-t", str(tmp_path / "lab.conf"))
    assert result.returncode == 2 and "lab.conf:2:1" in result.stderr and "Kathará assignment" in result.stderr, result.stderr
    assert root_links() == before and not state.labs()


def _form(name: str, tmp_path: Path, lab_name: str) -> Path:
    """A fixture of tests/fixtures/clab-forms copied with its folder, under a lab name of this test's."""
    folder = tmp_path / "forms"
    shutil.copytree(FORMS, folder)
    path = folder / f"{name}.clab.yml"
    path.write_text(path.read_text().replace(f"name: {name}\n", f"name: {lab_name}\n", 1))
    return path


def test_a_server_image_runs_as_the_machines_program_in_a_root_of_its_own(tmp_path, lab_name):
    """nginx:stable-alpine is this machine's nginx; binds add /greeting.txt in the node only; an alpine
    node's ash and apk work; endpoint ipv4/mac come from the extended form."""
    if not shutil.which("nginx"):
        pytest.fail("needs Debian's nginx: the Makefile's install list has it (make deps)")
    log = Path("/var/log/nginx/access.log")
    logged = log.stat().st_size if log.exists() else 0
    result = run_cli("deploy", "-t", str(_form("server-image", tmp_path, lab_name)), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        assert (
            "image 'nginx:stable-alpine' runs as this machine's nginx (nginx -g 'daemon off;') in a root of the node's own"
            in result.stderr
        )
        lab = Lab.running(lab_name)
        web, client = lab.nodes["web"], lab.nodes["client"]
        deadline, page = time.monotonic() + 15, ""
        while "served by nestlab" not in page and time.monotonic() < deadline:
            page = client.cmd("curl -s -m 2 http://192.168.77.2/")
            time.sleep(0.2)
        assert page == "served by nestlab's server-image test\n"
        assert web.cmd("cat /greeting.txt") == "hello from a path this machine lacks\n"
        assert not os.path.exists("/greeting.txt"), "the bind's new path is the node's, not the machine's"
        assert "02:00:00:00:77:01" in client.cmd("ip link show eth1")
        assert client.cmd("cat /tmp/greeting") == "hello from ash\n", "cmd ran under ash"
        assert "exec client: apk add curl (exit 0)" in result.stderr
        assert (log.stat().st_size if log.exists() else 0) == logged, "nginx logged in the node's root, not the machine's"
    finally:
        gone = run_cli("destroy", "--lab", lab_name)
    assert gone.returncode == 0, gone.stderr
    assert not [pid for pid, cmd in processes() if cmd.startswith("nginx: master")], "nginx went with its node"


def test_a_bridge_inside_a_node_joins_its_ports(tmp_path, lab_name):
    result = run_cli("deploy", "-t", str(_form("bridge-in-node", tmp_path, lab_name)), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        assert "the bridge br0 is made inside r1 by r1's first exec commands (ports: c1port, c2port)" in result.stderr
        lab = Lab.running(lab_name)
        assert "master br0" in lab.nodes["r1"].cmd("ip link show c1port")
        assert "1 received" in lab.nodes["c1"].cmd("ping -c1 -W2 192.168.78.12"), "c1 reaches c2 across r1's bridge"
        assert "1 received" in lab.nodes["c2"].cmd("ping -c1 -W2 192.168.78.1"), "and r1 itself on the bridge"
    finally:
        run_cli("destroy", "--lab", lab_name)


def test_host_endpoints_as_containerlab_takes_them(tmp_path, lab_name):
    """macvlan:IF with no flag (on a veth of this test's, its far end in a namespace of this test's: nothing
    leaves the machine), a host: name longer than 15 characters, the extended host form's mac."""
    far = f"nlt-{lab_name}"
    parent = f"nlt{lab_name[1:7]}p"
    subprocess.run(["ip", "netns", "add", far], check=True)
    try:
        subprocess.run(["ip", "link", "add", parent, "type", "veth", "peer", "name", "far0", "netns", far], check=True)
        subprocess.run(["ip", "link", "set", parent, "up"], check=True)
        subprocess.run(["ip", "-n", far, "address", "add", "192.168.79.1/24", "dev", "far0"], check=True)
        subprocess.run(["ip", "-n", far, "link", "set", "far0", "up"], check=True)
        long_name = f"{lab_name}_a_rather_long_host_interface"
        env = {**os.environ, "HOST_LINK": parent, "LONG_NAME": long_name, "SHORT_NAME": f"{lab_name[:6]}e2"}
        result = subprocess.run(
            [*NESTLAB, "deploy", "-t", str(_form("host-forms", tmp_path, lab_name))],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        try:
            assert result.returncode == 0, result.stderr
            assert f"macvlan:{parent}: the node's traffic leaves this machine on {parent}" in result.stderr
            lab = Lab.running(lab_name)
            assert "1 received" in lab.nodes["m1"].cmd("ping -c1 -W2 192.168.79.1"), "the macvlan reaches the parent's far end"
            shown = subprocess.run(["ip", "link", "show", long_name], capture_output=True, text=True)
            assert shown.returncode == 0 and f"altname {long_name}" in shown.stdout, shown.stderr
            assert "02:00:00:00:79:02" in lab.nodes["h1"].cmd("ip link show eth2")
        finally:
            gone = run_cli("destroy", "--lab", lab_name)
        assert gone.returncode == 0, gone.stderr
        assert subprocess.run(["ip", "link", "show", long_name], capture_output=True).returncode != 0, (
            "the long-named end went with its node"
        )
    finally:
        subprocess.run(["ip", "link", "del", parent], capture_output=True)
        subprocess.run(["ip", "netns", "del", far], check=True)


def test_extended_vxlan_keys_reach_the_remote_vtep(tmp_path, lab_name):
    """type: vxlan-stitch with dst-port/src-port/mtu, deployed from a namespace of this test's (its own
    "machine") whose only route leads to another namespace of this test's, the remote VTEP."""
    here, far = f"nlt-{lab_name}-m", f"nlt-{lab_name}-r"
    for ns in (here, far):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        sh = lambda ns, cmd: subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", cmd], check=True)  # noqa: E731
        subprocess.run(["ip", "-n", here, "link", "add", "up0", "type", "veth", "peer", "name", "up1", "netns", far], check=True)
        sh(here, "ip link set lo up && ip address add 172.31.78.1/24 dev up0 && ip link set up0 up")
        sh(
            far,
            "ip link set lo up && ip address add 172.31.78.12/24 dev up1 && ip link set up1 up && "
            "ip link add vx0 type vxlan id 200 remote 172.31.78.1 dstport 14792 && ip address add 10.78.0.2/24 dev vx0 && ip link set vx0 up",
        )
        inside = ["nsenter", f"--net=/run/netns/{here}", *NESTLAB]
        result = subprocess.run(
            [*inside, "deploy", "-t", str(_form("vxlan-stitch", tmp_path, lab_name))], capture_output=True, text=True, timeout=120
        )
        try:
            assert result.returncode == 0, result.stderr
            lab = Lab.running(lab_name)
            shown = lab.nodes["l1"].cmd("ip -d link show eth1")
            assert (
                "vxlan id 200 remote 172.31.78.12" in shown
                and "dstport 14792" in shown
                and "srcport 14793 14793" in shown
                and "mtu 1400" in shown
            ), shown
            assert "1 received" in lab.nodes["l1"].cmd("ping -c1 -W2 10.78.0.2"), "frames cross the tunnel both ways"
        finally:
            gone = subprocess.run([*inside, "destroy", "--lab", lab_name], capture_output=True, text=True, timeout=120)
        assert gone.returncode == 0, gone.stderr
    finally:
        for ns in (here, far):
            subprocess.run(["ip", "netns", "del", ns], check=True)


def test_a_failing_exec_is_reported_not_stray(tmp_path, lab_name):
    result = run_cli("deploy", "-t", str(_form("failing-exec", tmp_path, lab_name)), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        lines = result.stderr.splitlines()
        at = lines.index("exec n1: ip link add d1 type nestlabnosuchkind (exit 2)")
        assert lines[at + 1] == "  │ Error: Unknown device type."
        assert "this kernel has no 'nestlabnosuchkind' interfaces" in lines[at + 2]
        assert "exec n1: echo still here (exit 0)" in result.stderr
        assert f"lab {lab_name}: 1 exec command failed (on n1); the lab is up" in result.stderr
        assert not [line for line in lines if line.startswith("Error")], "no line of a node's output reads as nestlab's"
    finally:
        run_cli("destroy", "--lab", lab_name)


SCHEMA_DIR = ROOT / "tests" / "fixtures" / "clab-schema"


def _schema_keys() -> dict[str, set[str]]:
    """containerlab's schema (tests/fixtures/clab-schema, source noted there): the keys it allows at the top,
    on a node, on an extended endpoint, and on each link type (``brief``: the endpoints-only form)."""
    schema = json.loads((SCHEMA_DIR / "clab.schema.json").read_text())
    defs = schema["definitions"]
    keys = {
        "top": set(schema["properties"]),
        "node": set(defs["node-config"]["properties"]),
        "endpoint": set(defs["link-endpoint"]["properties"]),
        "brief": set(defs["link-config-short"]["properties"]),
    }
    for name, spec in defs.items():
        if name.startswith("link-type-"):
            keys[spec["properties"]["type"]["const"]] = set(spec["properties"])
    return keys


def _keys_used(doc: dict) -> dict[str, set[str]]:
    body = doc["topology"]
    used: dict[str, set[str]] = {"top": set(doc), "node": set(), "endpoint": set()}
    for section in ("nodes", "groups", "kinds"):
        for spec in (body.get(section) or {}).values():
            used["node"] |= set(spec or {})
    for link in body["links"]:
        used.setdefault(link.get("type", "brief"), set()).update(link)
        ends = [link["endpoint"]] if "endpoint" in link else link["endpoints"]
        for end in ends:
            used["endpoint"] |= set(end) if isinstance(end, dict) else set()
    return used


def test_every_key_of_containerlabs_schema_is_taken_and_acts(tmp_path, lab_name):
    """A file using every key containerlab's schema allows on a node and on each link type deploys: keys nestlab
    cannot honour are notes, the rest act (mgmt-net's endpoint mac:, macvlan mode:, vxlan ports, env-files, ...)."""
    import yaml

    from nestlab.model.schema.nodes import IGNORED_NODE_KEYS

    doc = yaml.safe_load((SCHEMA_DIR / "every-key.clab.yml").read_text())
    used, allowed = _keys_used(doc), _schema_keys()
    for where, keys in allowed.items():
        assert keys <= used.get(where, set()), f"every-key.clab.yml lacks {where} keys {sorted(keys - used.get(where, set()))}"
    folder = tmp_path / "every-key"
    shutil.copytree(SCHEMA_DIR, folder)
    path = folder / "every-key.clab.yml"
    path.write_text(path.read_text().replace("name: every-key\n", f"name: {lab_name}\n", 1))
    prefix, far = lab_name[1:8], f"nlt-{lab_name}"
    parent = f"nlt{prefix}p"
    subprocess.run(["ip", "netns", "add", far], check=True)
    try:
        subprocess.run(["ip", "link", "add", parent, "type", "veth", "peer", "name", "far0", "netns", far], check=True)
        subprocess.run(["ip", "link", "set", parent, "up"], check=True)
        env = {**os.environ, "HOST_LINK": parent, "HOST_PREFIX": prefix}
        result = subprocess.run([*NESTLAB, "deploy", "-t", str(path)], capture_output=True, text=True, env=env, timeout=120)
        try:
            assert result.returncode == 0, result.stderr
            for key in used["node"] & set(IGNORED_NODE_KEYS):
                assert f"topology.nodes.n1.{key}: ignored: {IGNORED_NODE_KEYS[key]}" in result.stderr, key
            for said in (
                "runtime: podman",
                "components: list",
                "veth-stitch is a veth here",
                "dummy interface",
                "debug: ignored",
            ):
                assert said in result.stderr, said
            assert "topology.links[*].vars: on 8 links" in result.stderr, "one note for the links' vars"
            lab = Lab.running(lab_name)
            n1, n2, n3 = (lab.nodes[n] for n in ("n1", "n2", "n3"))
            # mgmt-net with an endpoint mac: the node's end has it, the machine's end is a port of the management bridge
            assert "link/ether 02:97:00:00:04:01 " in n1.cmd("ip link show eth4")
            shown = subprocess.run(["ip", "link", "show", f"{prefix}m"], capture_output=True, text=True).stdout
            assert "master br-clab" in shown, shown
            assert "link/ether 02:97:00:00:05:01 " in n1.cmd("ip link show eth5") and f"{prefix}h" in root_links()
            # veth: endpoint mac and ipv4, link-level ipv4/ipv6 and mtu; the brief form's addresses and mtu
            assert "link/ether 02:97:00:00:03:01 " in n1.cmd("ip link show eth2")
            assert "1 received" in n1.cmd("ping -c1 -W2 10.97.3.3") and "1 received" in n1.cmd("ping -c1 -W2 10.97.2.3")
            assert "fd00:97:2::1/64" in n1.cmd("ip -6 addr show eth1") and "mtu 1450" in n1.cmd("ip link show eth1")
            assert "1 received" in n2.cmd("ping -c1 -W2 10.97.1.3") and "mtu 1400" in n2.cmd("ip link show eth1")
            assert "state UP" in n1.cmd("ip link show eth3"), "veth-stitch is a veth"
            assert "macvlan mode private" in n3.cmd("ip -d link show eth5")
            vx1, vx3 = n1.cmd("ip -d link show eth6"), n3.cmd("ip -d link show eth6")
            assert "vxlan id 9701 remote 127.0.0.1" in vx1 and "dstport 14801" in vx1 and "srcport 14811 14811" in vx1, vx1
            assert "vxlan id 9702" in vx3 and "dstport 14802" in vx3 and "mtu 1400" in vx3, vx3
            assert "dummy0" not in n3.cmd("ip link"), "a dummy link is dropped"
            # node keys that act: env-files under env, binds, cmd, sysctls, mgmt-ipv4, network-mode none
            assert "│ A=from env FROM_FILE=read from every-key.env" in result.stderr
            assert "FROM_FILE=" in n1.cmd("cat /tmp/nestlab-every-key/every-key.env")
            assert "sleep 600" in n1.cmd("ps -eo args")
            assert n1.cmd("sysctl -n net.ipv4.ip_forward").strip() == "1"
            assert "172.20.20.211/24" in n1.cmd("ip addr show eth0")
            assert "eth0" not in n2.cmd("ip -o link"), "network-mode: none"
        finally:
            gone = subprocess.run([*NESTLAB, "destroy", "--lab", lab_name], capture_output=True, text=True, timeout=120)
        assert gone.returncode == 0, gone.stderr
        assert not {f"{prefix}m", f"{prefix}h"} & root_links()
    finally:
        subprocess.run(["ip", "link", "del", parent], capture_output=True)
        subprocess.run(["ip", "netns", "del", far], check=True)


def test_a_note_on_many_nodes_is_one_line(topo_file, lab_name):
    """50 nodes with the same ignored keys: one line per note, with the count and the first names."""
    nodes = "".join(f"    n{i}: {{image: 'alpine:3', dns: {{servers: [192.0.2.53]}}}}\n" for i in range(1, 51))
    path = topo_file(f"name: {{name}}\ntopology:\n  nodes:\n{nodes}", "many.clab.yml")
    result = run_cli("deploy", "-t", str(path), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        notes = [line for line in result.stderr.splitlines() if line.startswith("note ")]
        assert len(notes) == 2, notes
        assert any(
            "many.clab.yml:4:" in n and "topology.nodes.*.image: on 50 nodes (n1, n2, n3, ...): ignored: image 'alpine:3'" in n
            for n in notes
        )
        assert any("topology.nodes.*.dns: on 50 nodes (n1, n2, n3, ...): ignored: nodes use the machine's" in n for n in notes)
    finally:
        run_cli("destroy", "--lab", lab_name)


EXEC_OUTPUT = """
name: {name}
topology:
  nodes:
    n1:
      exec:
        - ip address add 10.98.0.1/32 dev lo
        - ip address add 10.98.0.1/32 dev lo
        - sh -c 'seq 1 100; echo the cause is here >&2; exit 4'
"""


def test_a_failed_exec_shows_what_it_printed_trimmed(topo_file, lab_name):
    result = run_cli("deploy", "-t", str(topo_file(EXEC_OUTPUT, "lab.clab.yml")), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        lines = result.stderr.splitlines()
        at = lines.index("exec n1: ip address add 10.98.0.1/32 dev lo (exit 2)")
        assert "Address already assigned" in lines[at + 1] or "File exists" in lines[at + 1], lines[at + 1]
        at = lines.index("exec n1: sh -c 'seq 1 100; echo the cause is here >&2; exit 4' (exit 4)")
        shown = lines[at + 1 : at + 32]
        assert shown[0] == "  │ 1" and shown[9] == "  │ 10" and shown[10] == "  │ ... (71 lines not shown)", shown
        assert shown[11] == "  │ 82" and shown[-1] == "  │ the cause is here", shown
        assert "  │ 50" not in lines
    finally:
        run_cli("destroy", "--lab", lab_name)


def test_katharas_flags_that_change_nothing_here_say_why(tmp_path):
    folder = tmp_path / "kflags"
    folder.mkdir()
    (folder / "lab.conf").write_text('pc1[0]="A"\n')
    try:
        started = run_cli("kathara", "lstart", "-d", str(folder), "--noterminals", "--privileged", timeout=120)
        assert started.returncode == 0, started.stderr
        assert "note --privileged: ignored (devices run as root with every capability already)" in started.stderr
        shown = run_cli("kathara", "linfo", "-d", str(folder), "--live")
        assert shown.returncode == 0 and "pc1" in shown.stdout, shown.stderr
        assert "note --live: ignored (linfo prints the table once" in shown.stderr
    finally:
        wiped = run_cli("kathara", "wipe", "-f", "-a")
    assert wiped.returncode == 0 and "note -a: ignored (labs here are root's" in wiped.stderr, wiped.stderr
    assert "lab kflags: removed" in wiped.stderr and not cleanup.left("kflags")
