"""Chaos: SIGKILL at random points of every operation; `nestlab cleanup LAB` then leaves nothing of
ours, and objects that are not ours (a namespace, interfaces, a bridge, an OVS database's bridge,
a cgroup, an nftables table) are untouched.

Each operation first runs once whole (it must succeed; the kills are drawn between the CLI's own
start-up and that duration, so they land in the work); then it is killed ``NESTLAB_CHAOS_KILLS`` times (3 in ``make test``; the stress run
in docs/hardening.md uses 20) at points drawn by a seeded generator, so a failure can be replayed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field

import pytest
from conftest import NESTLAB, ROOT, leftovers, root_links, run_cli

from nestlab import Lab
from nestlab.backends.kernel import cgroups
from nestlab.backends.services import mpt_daemon

KILLS = int(os.environ.get("NESTLAB_CHAOS_KILLS", "3"))
HOSTS = 30


def lab_text(name: str, hosts: int = HOSTS) -> str:
    """A bridge with shaped hosts, an OVS switch, a nested node, a node with its own ``cmd``."""
    nodes = "".join(f"    h{i}: {{}}\n" for i in range(hosts))
    links = "".join(f'    - {{endpoints: ["h{i}:eth1", "sw:p{i}"], params: {{rate: 100mbit}}}}\n' for i in range(hosts))
    return (
        f"name: {name}\ntopology:\n  nodes:\n    sw: {{kind: bridge}}\n    o1: {{kind: ovs}}\n{nodes}"
        "    n1: {resources: {cpus: 1, memory: 128m}, components: {gnab: {}, iphy: {}}}\n"
        "    srv: {cmd: 'sleep 600'}\n"
        f"  links:\n{links}"
        '    - {endpoints: ["n1/iphy:radio", "sw:pn1"]}\n'
        '    - {endpoints: ["srv:eth1", "o1:p1"]}\n'
        '    - {endpoints: ["h0:eth2", "o1:p2"]}\n'
    )


def nested_text(name: str) -> str:
    nodes = "".join(
        f"    d{i}: {{resources: {{cpus: 0.5}}, components: {{gnab: {{}}, iphy1: {{}}, iphy2: {{}}}}}}\n" for i in range(8)
    )
    links = "".join(f'    - {{endpoints: ["d{i}/iphy1:radio", "main:d{i}"], params: {{rate: 50mbit}}}}\n' for i in range(8))
    return f"name: {name}\ntopology:\n  nodes:\n    main: {{kind: bridge}}\n{nodes}  links:\n{links}"


def schedule_text(name: str) -> str:
    steps = "".join(
        f'  - {{at: {0.2 * i:.1f}s, link: ["a:eth1", "b:eth1"], {"state: down" if i % 2 else "set: {rate: 10mbit}"}}}\n'
        for i in range(1, 8)
    )
    return (
        f"name: {name}\ntopology:\n  nodes: {{a: {{}}, b: {{}}}}\n  links:\n"
        f'    - {{endpoints: ["a:eth1", "b:eth1"], params: {{rate: 100mbit}}}}\nschedule:\n{steps}'
    )


MPT_TEXT = """name: {name}
topology:
  nodes: {{a: {{mptcp: {{subflows: 4}}}}, b: {{mptcp: {{subflows: 4}}}}}}
  links:
    - {{endpoints: [a, b], paths: 3, params: {{rate: 100mbit}}, multipath: {{type: mpt}}}}
"""


@dataclass
class Foreign:
    """Objects of every kind nestlab makes, made by someone else."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    ovs_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="foreign-ovs-"))

    @property
    def cgroup(self) -> str:
        return os.path.join(cgroups.hierarchies()[0], f"foreign-{self.tag}")

    def _ovs(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ovs-vsctl", f"--db=unix:{self.ovs_dir}/db.sock", "--no-wait", *args], capture_output=True, text=True
        )

    def make(self) -> None:
        t = self.tag
        for cmd in (
            ["ip", "netns", "add", f"foreign-{t}"],
            ["ip", "link", "add", f"fgv{t}", "type", "veth", "peer", "name", f"fgp{t}"],
            ["ip", "link", "add", f"fgb{t}", "type", "bridge"],
            ["nft", "add", "table", "inet", f"foreign_{t}"],
            ["ovsdb-tool", "create", f"{self.ovs_dir}/conf.db", "/usr/share/openvswitch/vswitch.ovsschema"],
            [
                "ovsdb-server",
                f"--remote=punix:{self.ovs_dir}/db.sock",
                f"--pidfile={self.ovs_dir}/db.pid",
                f"--unixctl={self.ovs_dir}/db.ctl",
                "--detach",
                f"--log-file={self.ovs_dir}/db.log",
                f"{self.ovs_dir}/conf.db",
            ],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        assert self._ovs("add-br", f"fgo{t}").returncode == 0
        os.mkdir(self.cgroup)

    def missing(self) -> list[str]:
        t = self.tag
        gone = (
            []
            if f"foreign-{t}" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            else ["namespace"]
        )
        gone += [name for name in (f"fgv{t}", f"fgp{t}", f"fgb{t}") if name not in root_links()]
        gone += (
            []
            if subprocess.run(["nft", "list", "table", "inet", f"foreign_{t}"], capture_output=True).returncode == 0
            else ["nft table"]
        )
        gone += [] if self._ovs("br-exists", f"fgo{t}").returncode == 0 else ["OVS bridge"]
        return gone + ([] if os.path.isdir(self.cgroup) else ["cgroup"])

    def remove(self) -> None:
        t = self.tag
        for cmd in (
            ["ip", "netns", "del", f"foreign-{t}"],
            ["ip", "link", "del", f"fgv{t}"],
            ["ip", "link", "del", f"fgb{t}"],
            ["nft", "delete", "table", "inet", f"foreign_{t}"],
        ):
            subprocess.run(cmd, capture_output=True)
        if os.path.exists(f"{self.ovs_dir}/db.pid"):
            with open(f"{self.ovs_dir}/db.pid") as fh:
                os.kill(int(fh.read()), signal.SIGTERM)
        shutil.rmtree(self.ovs_dir, ignore_errors=True)
        if os.path.isdir(self.cgroup):
            os.rmdir(self.cgroup)


@pytest.fixture(scope="module")
def foreign():
    objs = Foreign()
    try:
        objs.make()
        yield objs
    finally:
        objs.remove()


@dataclass
class Operation:
    """``setup`` runs whole (CLI argument lists); ``killed`` is the command killed part-way."""

    setup: list[list[str]]
    killed: list[str]


def operations(folder: str, name: str) -> dict[str, Operation]:
    files = {
        "lab": lab_text(name),
        "small": lab_text(name, 5),
        "nested": nested_text(name),
        "schedule": schedule_text(name),
        "mpt": MPT_TEXT.format(name=name),
        "mgmt": lab_text(name).replace("topology:", "mgmt: {}\ntopology:", 1),
    }
    paths = {}
    for key, text in files.items():
        paths[key] = os.path.join(folder, f"{key}.yml")
        with open(paths[key], "w") as fh:
            fh.write(text)
    deploy = ["deploy", "-t", paths["lab"]]
    return {
        "deploy": Operation([], deploy),
        "reconcile": Operation([["deploy", "-t", paths["small"]]], deploy),
        "destroy": Operation([deploy], ["destroy", "--lab", name]),
        # -t: the full command, long enough to be killed in its work (`--lab` goes the quick way, 40 ms, through the same LinkHandle)
        "link set": Operation(
            [deploy], ["link", "set", "-t", paths["lab"], "h0:eth1", "sw:p0", "--rate", "10mbit", "--queue", "50"]
        ),
        "schedule": Operation([], ["run", "-t", paths["schedule"]]),
        "nested deploy": Operation([], ["deploy", "-t", paths["nested"]]),
        "bench": Operation([deploy], ["bench", "run", "--lab", name, "--from", "h0", "--to", "h1", "--duration", "1"]),
        "mpt deploy": Operation([], ["deploy", "-t", paths["mpt"]]),
        # management network: names in /etc/hosts and ip netns, SSH gate, ssh config, NAT rules, the bridge's ports
        "mgmt deploy": Operation([], ["deploy", "-t", paths["mgmt"]]),
        "node restart": Operation(
            [deploy], ["node", "restart", "--lab", name, "o1", "srv", "n1", *(f"h{i}" for i in range(HOSTS))]
        ),
    }


def _cli(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([*NESTLAB, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _restore_and_check(name: str, foreign: Foreign, what: str) -> None:
    result = run_cli("cleanup", name)
    assert result.returncode == 0, f"{what}: cleanup failed: {result.stderr}"
    left = leftovers()
    assert left == [], f"{what}: left behind {left}"
    assert foreign.missing() == [], f"{what}: foreign objects gone: {foreign.missing()}"


@pytest.mark.parametrize(
    "op",
    [
        "deploy",
        "reconcile",
        "destroy",
        "link set",
        "schedule",
        "nested deploy",
        "bench",
        "mpt deploy",
        "mgmt deploy",
        "node restart",
    ],
)
def test_sigkill_at_random_points_then_cleanup_leaves_nothing(op, foreign, tmp_path, lab_name):
    if op == "mpt deploy":
        mpt_daemon.binary()  # raises if the daemon is not built: it must be tested, not skipped
    operation = operations(str(tmp_path), lab_name)[op]
    rng = random.Random(f"{op}-{KILLS}")
    for args in operation.setup:
        assert run_cli(*args).returncode == 0
    t0 = time.monotonic()
    whole = _cli(operation.killed)
    assert whole.wait(timeout=120) == 0, f"{op} failed unkilled: {whole.stderr.read()}"
    whole.stderr.close()
    span = time.monotonic() - t0
    t0 = time.monotonic()
    run_cli("version", check=True)
    startup = min(time.monotonic() - t0, span / 2)  # kills land after the interpreter has started, in the work
    _restore_and_check(lab_name, foreign, f"{op} unkilled")
    landed = 0
    for kill in range(KILLS):
        for args in operation.setup:
            assert run_cli(*args).returncode == 0
        at = rng.uniform(startup, span)
        proc = _cli(operation.killed)
        time.sleep(at)
        landed += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        _restore_and_check(lab_name, foreign, f"{op}, kill {kill + 1} at {at:.2f} s of {span:.2f} s")
    print(
        f"chaos {op}: {KILLS} kills between {startup:.2f} and {span:.2f} s, {landed} before it ended, 0 leftovers"
    )  # shown with -s
    assert landed >= KILLS // 2, f"only {landed} of {KILLS} kills landed before {op} ended"


def test_sigkill_of_the_mpt_daemons_then_cleanup_leaves_nothing(foreign, tmp_path, lab_name):
    mpt_daemon.binary()
    path = tmp_path / "mpt.yml"
    path.write_text(MPT_TEXT.format(name=lab_name))
    far = Lab.from_file(path).plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    rng = random.Random(f"mpt-daemons-{KILLS}")
    for kill in range(KILLS):
        assert run_cli("deploy", "-t", str(path)).returncode == 0
        daemons = mpt_daemon.pids(lab_name)
        assert len(daemons) == 2, "the lab must run an MPT daemon per end"
        traffic = subprocess.Popen(
            [*NESTLAB, "exec", "--lab", lab_name, "a", "--", "ping", "-c", "50", "-i", "0.02", far],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.0, 1.0))
        os.kill(rng.choice(daemons), signal.SIGKILL)
        _restore_and_check(lab_name, foreign, f"MPT daemon kill {kill + 1}")
        traffic.wait(timeout=30)
