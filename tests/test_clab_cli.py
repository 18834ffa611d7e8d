"""`nestlab clab ...` answers containerlab's commands, flags and JSON, so tools that drive containerlab drive nestlab."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from conftest import ROOT, run_cli

from nestlab.lab import state

TOPO = """name: {name}
topology:
  kinds:
    linux: {image: alpine:3}
  nodes:
    n1: {kind: linux, labels: {role: client}}
    n2: {kind: linux}
    br: {kind: bridge}
  links:
    - endpoints: ["n1:eth1", "n2:eth1"]
    - endpoints: ["n1:eth2", "br:p1"]
"""


def test_deploy_inspect_exec_destroy_as_containerlab_does(topo_file, lab_name):
    path = topo_file(TOPO)
    deployed = run_cli("clab", "deploy", "-t", str(path), "--max-workers", "4", "-d")
    assert deployed.returncode == 0, deployed.stderr

    listed = json.loads(run_cli("clab", "inspect", "-t", str(path), "--format", "json", check=True).stdout)
    assert list(listed) == [lab_name]
    rows = {c["name"]: c for c in listed[lab_name]}
    assert set(rows) == {f"clab-{lab_name}-n1", f"clab-{lab_name}-n2", f"clab-{lab_name}-br"}
    n1 = rows[f"clab-{lab_name}-n1"]
    assert {k: n1[k] for k in ("lab_name", "kind", "image", "state", "absLabPath")} == {
        "lab_name": lab_name,
        "kind": "linux",
        "image": "alpine:3",
        "state": "running",
        "absLabPath": str(path),
    }
    assert len(n1["container_id"]) == 12 and rows[f"clab-{lab_name}-br"]["kind"] == "bridge"

    ran = json.loads(
        run_cli(
            "clab",
            "exec",
            "--name",
            lab_name,
            "--label",
            "role=client",
            "--cmd",
            "ip -j link show eth1",
            "--format",
            "json",
            check=True,
        ).stdout
    )
    assert list(ran) == [f"clab-{lab_name}-n1"]  # the label picked n1 only
    (result,) = ran[f"clab-{lab_name}-n1"]
    assert result["return-code"] == 0 and result["stdout"][0]["ifname"] == "eth1"  # JSON output stays JSON, as in containerlab
    plain = run_cli("clab", "exec", "-t", str(path), "--label", "clab-node-name=n2", "--cmd", "hostname")
    assert plain.stdout.strip() == "n2" and f"node=clab-{lab_name}-n2" in plain.stderr
    both = run_cli("clab", "exec", "-t", str(path), "--label", f"clab-node-name=n1,containerlab={lab_name}", "--cmd", "hostname")
    assert both.stdout.strip() == "n1", both.stdout + both.stderr  # comma-separated labels, all of them matched
    unquoted = run_cli("clab", "exec", "-t", str(path), "--cmd", "echo 'x")
    assert unquoted.returncode == 1 and "Traceback" not in unquoted.stderr, unquoted.stderr
    assert '--cmd "echo \'x": No closing quotation' in unquoted.stderr, unquoted.stderr

    gone = run_cli("clab", "destroy", "-t", str(path), "--cleanup", "-y")
    assert gone.returncode == 0, gone.stderr
    assert lab_name not in state.labs()


def test_install_cli_makes_a_containerlab_command(tmp_path):
    done = run_cli("compat", "install-cli", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    version = subprocess.run([str(tmp_path / "containerlab"), "version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "version: 0." in version.stdout
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "containerlab").write_text("#!/bin/sh\necho the real one\n")
    refused = run_cli("compat", "install-cli", "--dir", str(tmp_path / "other"))
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert os.access(tmp_path / "containerlab", os.X_OK)


def test_netlabs_lab_runs_through_the_containerlab_command(tmp_path, lab_name):
    """netlab's own output (`netlab create`, provider clab: clab.yml binding its scripts to /etc/config, a path this
    machine lacks), deployed and configured the way netlab drives containerlab: deploy, exec each script, OSPF Full."""
    folder = tmp_path / "netlab"
    shutil.copytree(ROOT / "tests" / "fixtures" / "netlab-frr", folder)
    topo = folder / "clab.yml"
    topo.write_text(topo.read_text().replace("name: nlt\n", f"name: {lab_name}\n", 1))
    result = run_cli("clab", "deploy", "-t", str(topo), timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        for router in ("r1", "r2"):
            for script in ("bash /etc/config/01-initial.sh", "vtysh -f /etc/config/02-ospf.sh"):
                done = run_cli(
                    "clab", "exec", "--name", lab_name, "--label", f"clab-node-name={router}", "--cmd", script, "--format", "json"
                )
                assert done.returncode == 0 and json.loads(done.stdout)[f"clab-{lab_name}-{router}"][0]["return-code"] == 0, (
                    done.stdout + done.stderr
                )
        for router, far in (("r1", "10.0.0.2/32"), ("r2", "10.0.0.1/32")):  # both ways: the ping's answer needs r2's route
            deadline, routes = time.monotonic() + 60, ""
            while f"O>* {far}" not in routes and time.monotonic() < deadline:  # selected and in the kernel's table (*)
                time.sleep(1)
                routes = run_cli("exec", "--lab", lab_name, router, "--", "vtysh", "-c", "show ip route ospf").stdout
            assert f"O>* {far}" in routes, (
                routes + run_cli("exec", "--lab", lab_name, router, "--", "vtysh", "-c", "show ip ospf neighbor").stdout
            )
        assert (
            "1 received"
            in run_cli("exec", "--lab", lab_name, "r1", "--", "ping", "-c1", "-W2", "-I", "10.0.0.1", "10.0.0.2").stdout
        )
        assert run_cli("exec", "--lab", lab_name, "r1", "--", "ip", "-br", "address", "show", "eth1").stdout.split()[2:] == [
            "10.1.0.1/30"
        ], "only netlab's address: a clab.yml gets none of nestlab's automatic ones"
        assert not os.path.exists("/etc/config"), "the scripts' folder is the nodes', not the machine's"
    finally:
        gone = run_cli("clab", "destroy", "--name", lab_name, "--cleanup")
    assert gone.returncode == 0 and lab_name not in state.labs(), gone.stderr
