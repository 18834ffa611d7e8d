"""containerlab's own forms: groups, cpu/memory, stages with wait-for, cmd, healthchecks, host: and mgmt-net:
endpoints, the extended link form; containerlab's smoke topologies run unchanged; bad input is refused whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, root_links, run_cli

from nestlab import Lab
from nestlab.backends import cgroups
from nestlab.lab import state

SMOKE = ROOT / "tests" / "fixtures" / "clab-smoke"

SHAPES = """
name: {name}
topology:
  groups:
    small: {cpu: 0.5, memory: 64Mb, labels: {role: edge}}
  nodes:
    a:
      group: small
      cmd: sh -c "echo started > STAMP/a.cmd; exec sleep 600"
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
    notes = [p.message for p in lab.notices]
    assert any("MAC" in n for n in notes), notes  # the extended form's mac: is noted, not silently dropped
    started = time.monotonic()
    lab.deploy()
    try:
        took = time.monotonic() - started
        # Stages: a configures only once b is healthy (b waits 1 s, then its exec takes 0.5 s).
        assert int((tmp_path / "a.configure").read_text()) > int((tmp_path / "b.ready").read_text())
        assert took >= 1.5, took
        deadline = time.monotonic() + 10
        while not (tmp_path / "a.cmd").exists() and time.monotonic() < deadline:  # cmd runs beside the deploy
            time.sleep(0.1)
        assert (tmp_path / "a.cmd").read_text() == "started\n"
        assert "sleep 600" in lab.nodes["a"].cmd("ps -eo args"), "cmd keeps running"
        # groups + cpu/memory: the group's limits reach the node's cgroup.
        limits = cgroups.Tree(lab.name).limits("a")
        assert limits["cpus"] == "0.5" and limits["memory"] == str(64 << 20), limits
        assert "1 received" in lab.nodes["a"].cmd("ping -c1 -W1 10.9.0.2")
        assert "1 received" in lab.nodes["c"].cmd("ping -c1 -W1 10.9.2.2"), "the extended veth form"
        assert "1 received" in lab.nodes["c"].cmd("ping -c1 -W1 10.9.9.1"), "both on the lab's management bridge"
        # host:IF is a veth end in this machine's namespace, up, and it reaches the node.
        assert host_if in root_links()
        subprocess.run(["ip", "addr", "add", "10.9.1.2/24", "dev", host_if], check=True)
        assert subprocess.run(["ping", "-c1", "-W1", "10.9.1.1"], capture_output=True).returncode == 0
        assert lab.nodes["c"].cmd("cat /proc/net/dev").count("eth") == 2
    finally:
        lab.destroy()
    assert host_if not in root_links(), "the host's end went with the lab"


def test_containerlab_smoke_topologies_run_unchanged(tmp_path):
    """containerlab's tests/01-smoke: stages (wait-for across four nodes, host exec, healthcheck), a bridge and
    host: endpoints, mgmt-net:, empty node entries, startup-delay."""
    made = [p for p in ("/tmp/host-exec-test", "/tmp/time") if not os.path.exists(p)]
    labs = {"stages": "stages", "03-linux-nodes-to-bridge-and-host": "03-bridge-and-host", "16-mgmtnetinterface": "mgmtnetif",
            "node-filter": "node-filter", "stages-race": "stages-race"}
    for name, lab in labs.items():
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(SMOKE / f"{name}.clab.yml", folder)
        before = root_links()
        result = run_cli("deploy", "-t", str(folder / f"{name}.clab.yml"), timeout=120)
        try:
            assert result.returncode == 0, result.stderr
            assert lab in state.labs()
            if name == "stages":
                out = result.stdout + result.stderr
                # node4 exits create-links (uname) before it is healthy; node3 exits create only after node4 is healthy.
                assert out.index("exec node4: uname -n") < out.index("hey I am exiting healthy stage") < out.index("exec node3: ls /sys/class/net/")
                assert "exec node1 (on the host): bash -c 'echo foo > /tmp/host-exec-test' (exit 0)" in out
                assert Path("/tmp/host-exec-test").read_text() == "foo\n"
                assert "n3eth1" in root_links()
            if name == "03-linux-nodes-to-bridge-and-host":
                assert "l1-01-03-eth3" in root_links()
            if name == "stages-race":
                assert "exec l1: ip l show dev eth1 (exit 0)" in result.stdout + result.stderr
        finally:
            gone = run_cli("destroy", "--lab", lab)
        assert gone.returncode == 0, gone.stderr
        assert root_links() <= before, root_links() - before
    for path in made:
        Path(path).unlink(missing_ok=True)


BAD = {
    "a wait-for circle": ("""
name: {name}
topology:
  nodes:
    a: {stages: {configure: {wait-for: [{node: b, stage: configure}]}}}
    b:
      stages:
        create:
          wait-for: [{node: a, stage: healthy}]
""", ":5:", "circle"),
    "a wait-for on a missing node": ("""
name: {name}
topology:
  nodes:
    a: {stages: {create: {wait-for: [{node: zz}]}}}
""", ":5:", "node 'zz'"),
    "an unknown stage": ("""
name: {name}
topology:
  nodes:
    a: {stages: {boot: {}}}
""", ":5:", "create-links"),
    "a Go template": ("""
name: {name}
topology:
  nodes:
    a: {kind: {{ .kind }}}
""", ":5:", "Go template"),
    "a macvlan endpoint on a real interface": ("""
name: {name}
topology:
  nodes: {a: {}}
  links: [{endpoints: ["a:eth1", "macvlan:${NESTLAB_NO_SUCH_VAR:=ens3}"]}]
""", ":5:", "allow_host_interfaces"),
    "a type: vxlan link": ("""
name: {name}
topology:
  nodes: {a: {}}
  links: [{type: vxlan, endpoint: {node: a, interface: eth1}, remote: 10.0.0.9, vni: 9}]
""", ":5:", "not supported"),
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
