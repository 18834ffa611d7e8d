"""`nestlab clab ...` answers containerlab's commands, flags and JSON, so tools that drive containerlab drive nestlab."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from conftest import NESTLAB, ROOT, run_cli

from nestlab.engine import state

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


def test_topology_from_a_folder_stdin_or_a_url_and_flags_from_clab_variables(tmp_path, lab_name):
    """-t DIR finds the folder's one *.clab.yml; -t - and -t URL keep what they read as a file of their own;
    CLAB_TOPO and CLAB_<COMMAND>_<FLAG> stand for flags; global flags may come before the command."""
    import http.server
    import threading

    text = "name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n"
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "x.clab.yml").write_text(text.replace("{name}", lab_name))
    try:
        done = run_cli("clab", "-r", "docker", "deploy", "-t", str(folder))
        assert done.returncode == 0, done.stderr
        (folder / "y.clab.yml").write_text("name: other\n")
        refused = run_cli("clab", "inspect", "-t", str(folder))
        assert refused.returncode == 2 and "x.clab.yml, y.clab.yml" in refused.stderr, refused.stderr
        again = subprocess.run(
            [*NESTLAB, "clab", "deploy", "--name", lab_name],
            env={**os.environ, "CLAB_TOPO": str(folder / "x.clab.yml"), "CLAB_DEPLOY_RECONFIGURE": "true"},
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert again.returncode == 0 and "nodes to create" in again.stderr, again.stderr  # reconfigured: made anew
        piped = subprocess.run(
            [*NESTLAB, "clab", "inspect", "-t", "-", "--format", "json"],
            input=text.replace("{name}", lab_name),
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert piped.returncode == 0 and lab_name in json.loads(piped.stdout), piped.stderr
        handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(folder))  # noqa: E731
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/x.clab.yml"
            gone = run_cli("clab", "destroy", "-t", url, "--cleanup")
        finally:
            server.shutdown()
        assert gone.returncode == 0 and f"lab {lab_name}: destroyed" in gone.stderr, gone.stderr
    finally:
        run_cli("clab", "destroy", "--name", lab_name)


def test_tools_veth_and_vxlan_join_a_node_to_this_machine_and_go_with_the_lab(topo_file, lab_name):
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {}\n")
    host_if = "nv" + lab_name[1:9]
    assert run_cli("clab", "deploy", "-t", str(path)).returncode == 0
    try:
        made = run_cli("clab", "tools", "veth", "create", "-a", f"clab-{lab_name}-a:eth7", "-b", f"host:{host_if}")
        assert made.returncode == 0, made.stderr
        subprocess.run(["ip", "addr", "add", "10.98.0.1/30", "dev", host_if], check=True)
        run_cli("exec", "--lab", lab_name, "a", "--", "ip", "addr", "add", "10.98.0.2/30", "dev", "eth7", check=True)
        assert subprocess.run(["ping", "-c1", "-W2", "10.98.0.2"], capture_output=True).returncode == 0
        tunnel = run_cli("clab", "tools", "vxlan", "create", "--remote", "127.0.0.1", "-l", host_if, "-i", "42")
        assert tunnel.returncode == 0, tunnel.stderr
        shown = subprocess.run(["ip", "-d", "link", "show", f"vx-{host_if}"[:15]], capture_output=True, text=True).stdout
        assert "vxlan id 42" in shown and f"alias nestlab:{lab_name}" in shown, shown
        redirects = subprocess.run(["tc", "filter", "show", "dev", host_if, "ingress"], capture_output=True, text=True).stdout
        assert "mirred" in redirects or "redirect" in redirects, redirects
        refused = run_cli("clab", "tools", "vxlan", "create", "--remote", "127.0.0.1", "-l", "lo")
        assert refused.returncode == 1 and "no lab's marker" in refused.stderr, refused.stderr
    finally:
        run_cli("clab", "destroy", "--name", lab_name)
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert host_if not in links, "the host end and its tunnel went with the lab"


def test_generate_writes_containerlabs_clos_and_deploys_it(tmp_path, lab_name):
    import yaml

    path = tmp_path / "clos.clab.yml"
    done = run_cli("clab", "gen", "--name", lab_name, "--nodes", "2,3:frr,1", "--file", str(path))
    assert done.returncode == 0, done.stderr
    topo = yaml.safe_load(path.read_text())
    assert topo["topology"]["nodes"]["node2-3"] == {"group": "tier-2", "kind": "frr"}
    ends = [tuple(link["endpoints"]) for link in topo["topology"]["links"]]
    assert len(ends) == 2 * 3 + 3 * 1 and ("node1-2:eth3", "node2-3:eth2") in ends and ("node2-1:eth3", "node3-1:eth1") in ends
    try:
        deployed = run_cli("clab", "deploy", "-t", str(path), timeout=120)
        assert deployed.returncode == 0, deployed.stderr
        assert "node3-1" in run_cli("clab", "inspect", "--name", lab_name).stdout
    finally:
        run_cli("clab", "destroy", "--name", lab_name, "--cleanup")
    bad = run_cli("clab", "generate", "--name", "x", "--nodes", "2,zero")
    assert bad.returncode == 1 and "--nodes zero: give N[:KIND[:TYPE]]" in bad.stderr, bad.stderr


def test_flags_that_change_nothing_here_say_why_and_license_is_written(tmp_path):
    import yaml

    made = run_cli(
        "clab",
        "generate",
        "--name",
        "flags",
        "--nodes",
        "2,1",
        "--license",
        "linux=lic.key",
        "--max-workers",
        "4",
        "--owner",
        "bob",
    )
    assert made.returncode == 0, made.stderr
    assert yaml.safe_load(made.stdout)["topology"]["kinds"] == {"linux": {"license": "lic.key"}}, made.stdout
    assert "note --max-workers: ignored (nestlab makes every node in one process" in made.stderr
    assert "note --owner: ignored (the lab directory's files belong to whoever owns the folder it is in)" in made.stderr
    path = tmp_path / "flags.clab.yml"
    path.write_text(made.stdout)
    drawn = run_cli("clab", "graph", "-t", str(path), "--mermaid", "--offline")
    assert drawn.returncode == 0, drawn.stderr
    assert "note --offline: ignored (the live page's scripts are nestlab's own copies" in drawn.stderr
    assert "flowchart" in (tmp_path / "flags.clab.mermaid").read_text()
