"""The command lines that the VS Code extension, clab-api-server and netlab run (tests/fixtures/clab-clients.yml,
taken from their sources) replayed against a lab through nestlab's containerlab command: each exits 0, its
JSON has containerlab's fields, and what it did is read back from the kernel, the processes and the files
(the call's ``effect``): a stopped node has no process and its link is down, the rate set is the HTB class's,
the command run ran in that node's namespace, the destroyed lab left nothing."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest
import yaml
from conftest import NESTLAB, ROOT, run_cli

from nestlab import names
from nestlab.backends.kernel import namespaces
from nestlab.engine import cleanup

CLIENTS = yaml.safe_load((ROOT / "tests" / "fixtures" / "clab-clients.yml").read_text())
# n1 is a router (containerlab's FRR image: Debian's FRR here), so it has processes to stop and a
# configuration to save; n2 runs `sleep` as its main process.  The link carries addresses of its own.
LAB = """name: {name}
topology:
  nodes:
    n1: {kind: linux, image: "frrouting/frr:latest", startup-config: n1.conf}
    n2: {kind: linux, cmd: sleep infinity}
  links:
    - type: veth
      endpoints:
        - {node: n1, interface: eth1, ipv4: 10.42.0.1/24}
        - {node: n2, interface: eth1, ipv4: 10.42.0.2/24}
"""
ADDRESS = {"n1": "10.42.0.1", "n2": "10.42.0.2"}
DAEMON = {"n1": "zebra", "n2": "sleep"}  # a process each node runs while it is up


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _at(data, path: list[str]):
    """The value at a dotted path, taking the first item of every list on the way."""
    for key in path:
        while isinstance(data, list):
            assert data, f"an empty list before {key}"
            data = data[0]
        assert isinstance(data, dict) and key in data, (key, data)
        data = data[key]
    return data


def _stream(argv: list[str], fields: list[str]) -> dict[str, dict]:
    """A command that runs until stopped: its first lines (a container and an interface) have ``fields``."""
    proc = subprocess.Popen([*NESTLAB, "clab", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen: dict[str, dict] = {}
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            seen.setdefault(event["type"], event)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert set(seen) == {"container", "interface"}, (seen, proc.stderr.read())
    for event in seen.values():
        assert all(f in event for f in fields), event
    return seen


def _wait(check, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


class Effects:
    """What each call must have done, read back from the machine; ``before_X`` runs before a call whose effect is X."""

    def __init__(self, lab: str, folder, values: dict[str, str]):
        self.lab, self.folder, self.values = lab, folder, values
        self.saved_routes = 0
        self.pids_before: dict[str, set[int]] = {}

    # --- reading the machine -------------------------------------------------------------------------------
    def netns(self, node: str) -> str:
        return names.netns_path(self.lab, node)

    def pids(self, node: str) -> dict[int, str]:
        """The processes in the node's namespace, by pid, with their names."""
        found = {}
        for pid in namespaces.pids_in({namespaces.inode(self.netns(node))} - {None}):
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    found[pid] = fh.read().strip()
            except OSError:
                continue
        return found

    def running(self, node: str) -> bool:
        return DAEMON[node] in self.pids(node).values()

    def inside(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(["nsenter", f"--net={self.netns(node)}", *cmd], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 or not check, (node, cmd, done.stderr)
        return done

    def links(self, node: str) -> dict[str, dict]:
        return {i["ifname"]: i for i in json.loads(self.inside(node, "ip", "-j", "addr", "show").stdout)}

    def pings(self, node: str, to: str) -> bool:
        return self.inside(node, "ping", "-c1", "-W1", ADDRESS[to], check=False).returncode == 0

    def htb_rate(self, node: str, iface: str = "eth1") -> str | None:
        """The rate of the interface's HTB class 1:1, as tc prints it (None: no shaper)."""
        shown = self.inside(node, "tc", "class", "show", "dev", iface).stdout
        found = re.search(r"class htb 1:1 .*? rate (\S+)", shown)
        return found.group(1) if found else None

    def clab_states(self) -> dict[str, str]:
        done = run_cli("clab", "inspect", "--name", self.lab, "--format", "json")
        assert done.returncode == 0, done.stderr
        return {c["name"]: c["state"] for c in json.loads(done.stdout)[self.lab]}

    def long(self, node: str) -> str:
        return f"clab-{self.lab}-{node}"

    def lab_folder(self):
        return self.folder / f"clab-{self.lab}"

    # --- the effects ---------------------------------------------------------------------------------------
    def deployed(self, done, data) -> None:
        """Both nodes exist with their processes, and traffic crosses their link."""
        for node in ("n1", "n2"):
            assert os.path.exists(self.netns(node)), node
            assert _wait(lambda node=node: self.running(node)), (node, self.pids(node))
        assert _wait(lambda: self.pings("n1", "n2")), "n1 reaches n2 over eth1"
        assert self.clab_states() == {self.long("n1"): "running", self.long("n2"): "running"}

    def interfaces_as_in_the_kernel(self, done, data, node: str) -> None:
        listed = {i["name"]: i for i in data[0]["interfaces"]}
        assert data[0]["name"] == self.long(node) and len(data) == 1, data
        kernel = self.links(node)
        assert set(listed) == set(kernel) - {"lo"}, (listed, kernel)
        for name, one in listed.items():
            k = kernel[name]
            assert (one["mac"], one["ifindex"], one["mtu"]) == (k["address"], k["ifindex"], k["mtu"]), (one, k)
            assert one["state"] == ("up" if k["operstate"] == "UP" else "down"), (one, k)

    def events_of_the_lab(self, done, seen) -> None:
        container, interface = seen["container"], seen["interface"]
        assert container["actor_name"] in (self.long("n1"), self.long("n2")), container
        assert container["attributes"]["state"] == "running", container
        node = interface["actor_name"].rsplit("-", 1)[1]
        kernel = self.links(node)[interface["attributes"]["ifname"]]
        assert int(interface["attributes"]["index"]) == kernel["ifindex"], (interface, kernel)
        assert interface["attributes"]["mac"] == kernel["address"], (interface, kernel)

    def stopped(self, done, data, node: str) -> None:
        """Its processes ended, its link is down (its peer sees no carrier, no ping crosses), inspect says exited."""
        other = "n2" if node == "n1" else "n1"
        assert self.pids(node) == {}, self.pids(node)
        assert "UP" not in self.links(node)["eth1"]["flags"], self.links(node)["eth1"]
        assert _wait(lambda: "NO-CARRIER" in self.links(other)["eth1"]["flags"], 5), self.links(other)["eth1"]
        assert not self.pings(other, node)
        assert ADDRESS[node] in json.dumps(self.links(node)["eth1"]["addr_info"]), "its address is kept"
        assert self.clab_states() == {self.long(node): "exited", self.long(other): "running"}
        assert self.running(other)

    def started(self, done, data, node: str) -> None:
        assert _wait(lambda: self.running(node)), self.pids(node)
        assert _wait(lambda: self.pings("n2" if node == "n1" else "n1", node))
        assert set(self.clab_states().values()) == {"running"}

    def before_restarted(self) -> None:
        self.pids_before = {node: set(self.pids(node)) for node in ("n1", "n2")}
        assert all(self.pids_before.values()), self.pids_before

    def restarted(self, done, data) -> None:
        """Every node's processes are new ones, and the link carries traffic again."""
        for node in ("n1", "n2"):
            assert _wait(lambda node=node: self.running(node)), node
            assert not set(self.pids(node)) & self.pids_before[node], (node, self.pids(node), self.pids_before[node])
        assert _wait(lambda: self.pings("n1", "n2"))

    def before_saved(self) -> None:
        """A route the startup configuration lacks, added to the running one: only a save puts it in the file."""
        self.saved_routes += 1
        self.route = f"ip route 198.51.100.{self.saved_routes}/32 blackhole"
        assert self.route not in self.saved_file().read_text()
        frr = subprocess.run(
            [*NESTLAB, "exec", "--lab", self.lab, "n1", "--", "vtysh", "-c", "configure terminal", "-c", self.route],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert frr.returncode == 0, frr.stderr

    def saved_file(self):
        from pathlib import Path

        return Path(names.node_dir(self.lab, "n1"), "etc", "frr", "frr.conf")

    def saved(self, done, data, node: str) -> None:
        assert node == "n1"
        assert self.route in self.saved_file().read_text(), self.saved_file().read_text()
        assert "hostname n1" in self.saved_file().read_text()

    def drawn(self, done, data) -> None:
        """The draw.io file beside the topology has both nodes and the link between them."""
        drawing = (self.folder / f"{self.lab}.clab.drawio").read_text()
        cells = dict(re.findall(r'<mxCell id="(\w+)" value="(\w+)&#10;', drawing))
        by_name = {name: cell for cell, name in cells.items()}
        assert {"n1", "n2"} <= set(by_name), drawing
        assert re.search(f'value="eth1 – eth1[^"]*"[^>]* source="{by_name["n1"]}" target="{by_name["n2"]}"', drawing), drawing

    def before_redeployed(self) -> None:
        self.pids_before = {node: set(self.pids(node)) for node in ("n1", "n2")}
        (self.lab_folder() / "marker").write_text("made before the redeploy")

    def redeployed(self, done, data) -> None:
        """Destroyed (lab folder too: -c) and deployed again: new processes, nothing added since."""
        assert not (self.lab_folder() / "marker").exists(), "redeploy -c removes the lab folder first"
        assert (self.lab_folder() / "topology-data.json").exists(), "and the deploy writes it again"
        for node in ("n1", "n2"):
            assert not set(self.pids(node)) & self.pids_before[node], node
        assert "eth9" not in self.links("n1"), "a veth added by `tools veth create` is not in the file"
        assert not os.path.exists(f"/sys/class/net/{self.values['hostif']}")
        self.deployed(done, data)

    def destroyed(self, done, data, folder: str) -> None:
        for node in ("n1", "n2"):
            assert not os.path.exists(self.netns(node)), node
        assert not cleanup.left(self.lab), cleanup.left(self.lab)
        assert not os.path.exists(f"/sys/class/net/{self.values['hostif']}")
        listed = run_cli("clab", "inspect", "--all", "--format", "json")
        assert self.lab not in listed.stdout, listed.stdout
        assert self.lab_folder().exists() == (folder == "folder-kept"), folder

    def removed(self, done, data, node: str) -> None:
        """--node-filter: that node and its link are gone, the other runs on."""
        other = "n2" if node == "n1" else "n1"
        assert not os.path.exists(self.netns(node))
        assert self.running(other)
        assert "eth1" not in self.links(other), "the link to the removed node went with it"
        assert self.clab_states() == {self.long(other): "running"}

    def says(self, done, data, text: str) -> None:
        assert text in done.stdout, done.stdout

    def containers_as_in_the_kernel(self, done, data) -> None:
        """Each node listed once, running, with the management address its eth0 has."""
        mine = data[self.lab]
        assert sorted(c["name"] for c in mine) == [self.long("n1"), self.long("n2")], mine
        for c in mine:
            node = c["name"].rsplit("-", 1)[1]
            assert c["state"] == "running" and self.running(node), c
            eth0 = [a for a in self.links(node)["eth0"]["addr_info"] if a["family"] == "inet"]
            assert c["ipv4_address"] == f"{eth0[0]['local']}/{eth0[0]['prefixlen']}", (c, eth0)
        assert len({c["container_id"] for c in mine}) == 2, mine

    def details_as_in_the_kernel(self, done, data) -> None:
        mine = data[self.lab]
        for c in mine:
            node = c["Labels"]["clab-node-name"]
            assert c["Names"] == [self.long(node)] and c["State"] == "running", c
            eth0 = [a for a in self.links(node)["eth0"]["addr_info"] if a["family"] == "inet"][0]
            settings = c["NetworkSettings"]
            assert (settings["IPv4addr"], settings["IPv4pLen"]) == (eth0["local"], eth0["prefixlen"]), (c, eth0)
        assert {c["Labels"]["clab-node-name"] for c in mine} == {"n1", "n2"}

    def ran_in(self, done, data, node: str) -> None:
        """Only the labelled node ran it, in its own namespace: the links it printed are that namespace's."""
        assert list(data) == [self.long(node)], list(data)
        (result,) = data[self.long(node)]
        assert result["return-code"] == 0 and result["cmd"] == ["ip", "-j", "link"], result
        printed = {i["ifname"]: (i["ifindex"], i["address"]) for i in result["stdout"]}
        kernel = {name: (i["ifindex"], i["address"]) for name, i in self.links(node).items()}
        assert printed == kernel, (printed, kernel)

    def rate_of(self, done, data, node: str, kbit: str) -> None:
        """The HTB class of what the node's eth1 sends has the rate (0: unshaped, no class or 400gbit); the peer is not shaped."""
        expected = {f"{int(kbit) // 1000}Mbit"} if int(kbit) else {None, "400Gbit"}
        assert self.htb_rate(node) in expected, self.htb_rate(node)
        other = "n2" if node == "n1" else "n1"
        assert self.htb_rate(other) is None, "only what the node sends"

    def netem_shown(self, done, data, node: str, kbit: str) -> None:
        (row,) = data[self.long(node)]
        assert row == {"interface": "eth1", "delay": "", "jitter": "", "packet_loss": 0.0, "rate": int(kbit), "corruption": 0.0}
        assert self.htb_rate(node) == f"{int(kbit) // 1000}Mbit"

    def veth_to_the_machine(self, done, data, node: str) -> None:
        """eth9 in the node and the interface on this machine are up, and each other's peer."""
        assert "eth9" in self.links(node), self.links(node)
        inner = self.links(node)["eth9"]
        outer = json.loads(
            subprocess.run(["ip", "-j", "link", "show", self.values["hostif"]], capture_output=True, text=True).stdout
        )
        assert outer, "the machine's end exists"
        assert "UP" in inner["flags"] and "UP" in outer[0]["flags"], (inner, outer)
        assert inner["link_index"] == outer[0]["ifindex"] and outer[0]["link_index"] == inner["ifindex"], (inner, outer)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_clients_command_lines_answer_as_containerlab_and_do_what_they_say(client, tmp_path, lab_name):
    topo = tmp_path / f"{lab_name}.clab.yml"
    topo.write_text(LAB.replace("{name}", lab_name))
    (tmp_path / "n1.conf").write_text("frr defaults traditional\nhostname n1\n!\n")
    values = {"topo": str(topo), "lab": lab_name, "node": "n1", "long": f"clab-{lab_name}-n1", "other": "n2"}
    values["hostif"] = "nl" + lab_name[1:9]
    effects = Effects(lab_name, tmp_path, values)
    try:
        for call in CLIENTS[client]["calls"]:
            argv = [_fill(a, values) for a in call["argv"]]
            effect, *args = shlex.split(_fill(call["effect"], values))
            getattr(effects, f"before_{effect}", lambda: None)()
            if "stream" in call:
                getattr(effects, effect)(None, _stream(argv, call["stream"]), *args)
                continue
            done = run_cli("clab", *argv, timeout=120)
            assert done.returncode == 0, (argv, done.stdout[-500:], done.stderr[-1500:])
            for line in call.get("lines", []):
                assert line in done.stdout, (argv, done.stdout)
            data = None
            if "json" in call:
                data = json.loads(done.stdout)
                for path in call["json"]:
                    _at(data, _fill(path, values).split("."))
            getattr(effects, effect)(done, data, *args)
    finally:
        run_cli("clab", "destroy", "--name", lab_name, "--cleanup")
    assert not cleanup.left(lab_name)
