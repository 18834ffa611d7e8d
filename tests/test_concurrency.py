"""Labs from several processes at once (issue 16): two labs cycled side by side never touch each other's
objects; the same lab deployed twice at once is built once (the other waits, then finds it built), never
half; exec and link set while the lab is reconciled keep working."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, leftovers, run_cli

from nestlab.engine import state

STAR = """name: {name}
topology:
  nodes:
    sw: {{kind: bridge}}
{hosts}
  links:
{links}
"""


def star(name: str, hosts: int, net: int) -> str:
    return STAR.format(
        name=name,
        hosts="".join(f"    h{i}: {{}}\n" for i in range(1, hosts + 1)),
        links="".join(
            f'    - {{endpoints: ["h{i}:eth1", "sw:p{i}"], ipv4: ["10.{net}.0.{i}/24", null]}}\n' for i in range(1, hosts + 1)
        ),
    )


CYCLE = """
import subprocess, sys
cli = [sys.executable, "-m", "nestlab.cli.app"]
for round in range({rounds}):
    for args in (["deploy", "-t", "{path}"], ["exec", "--lab", "{name}", "h1", "--", "ping", "-c1", "-W2", "10.{net}.0.{hosts}"],
                 ["destroy", "--lab", "{name}"]):
        done = subprocess.run([*cli, *args], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"round {{round}}: {{' '.join(args)}}: {{done.stdout[-300:]}} {{done.stderr[-300:]}}")
"""


def test_two_labs_cycled_side_by_side_never_touch_each_other(tmp_path, lab_name):
    procs = []
    for k, net in ((1, 71), (2, 72)):
        name = f"{lab_name}{k}"
        path = tmp_path / f"{name}.yml"
        path.write_text(star(name, 8, net))
        script = CYCLE.format(rounds=20, path=path, name=name, net=net, hosts=8)
        procs.append(
            subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err
    finally:
        for k in (1, 2):
            run_cli("destroy", "--lab", f"{lab_name}{k}")
    assert leftovers() == []


def test_the_same_lab_deployed_twice_at_once_is_built_once(tmp_path, lab_name):
    path = tmp_path / "lab.yml"
    path.write_text(star(lab_name, 30, 73))
    try:
        for _ in range(5):
            both = [
                subprocess.Popen(
                    [sys.executable, "-m", "nestlab.cli.app", "deploy", "-t", str(path)],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(2)
            ]
            results = [(p.wait(timeout=300), p.stderr.read()) for p in both]
            # The second waits for the first (state.locked) and then finds the lab built.
            assert [code for code, _ in results] == [0, 0] and any("nothing to change" in err for _, err in results), results
            report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json", check=True).stdout)
            assert len(report["nodes"]) == 31 and all(n["state"] == "running" for n in report["nodes"]), "never half a lab"
            assert "1 received" in run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W2", "10.73.0.30").stdout
            assert run_cli("destroy", "--lab", lab_name).returncode == 0
            assert lab_name not in state.labs()
    finally:
        run_cli("destroy", "--lab", lab_name)


def test_exec_and_link_set_during_a_reconcile_are_safe(tmp_path, lab_name):
    """While a reconcile adds (or removes) 60 nodes, commands against the running part keep working:
    exec runs, link set waits for the reconcile's lock and then applies, and the lab's record of the
    link always matches the kernel."""
    small, big = tmp_path / "small.yml", tmp_path / "big.yml"
    small.write_text(star(lab_name, 4, 74))
    big.write_text(star(lab_name, 64, 74))
    try:
        assert run_cli("deploy", "-t", str(small)).returncode == 0
        for round_ in range(3):
            reconcile = subprocess.Popen(
                [sys.executable, "-m", "nestlab.cli.app", "deploy", "-t", str(big if round_ % 2 == 0 else small)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            rates = []
            while reconcile.poll() is None or not rates:
                rate = f"{10 + len(rates)}mbit"
                done = run_cli("link", "set", "--lab", lab_name, "h1:eth1", "sw:p1", "--rate", rate)
                assert done.returncode == 0, done.stderr
                rates.append(rate)
                ping = run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W2", "10.74.0.2")
                assert ping.returncode == 0, ping.stdout + ping.stderr
            _, err = reconcile.communicate(timeout=300)
            assert reconcile.returncode == 0, err
            # The later command wins (the reconcile puts back the file's shaping if it took the lab
            # after a link set), and what the lab records is what the kernel does.
            (link,) = json.loads(
                run_cli("link", "show", "--lab", lab_name, "h1:eth1", "sw:p1", "--format", "json", check=True).stdout
            )
            recorded = link["sends"]["h1:eth1"].get("rate")
            assert link["kernel"]["h1:eth1"].get("rate_bps") == (
                int(recorded.removesuffix("mbit")) * 10**6 if recorded else None
            ), link
            assert recorded in (None, *rates), (recorded, rates)
            report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json", check=True).stdout)
            assert len(report["nodes"]) == (65 if round_ % 2 == 0 else 5) and all(
                n["state"] == "running" for n in report["nodes"]
            )
    finally:
        run_cli("destroy", "--lab", lab_name)
    assert leftovers() == []
