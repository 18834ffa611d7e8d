"""checks: and `nestlab check`: ten checks hold on a working lab, a link broken by hand fails exactly the checks
that need it (named in the JUnit file), and `nestlab run` times the reconvergence after a scheduled failure
as the traffic itself sees it (timestamped pings)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import types
import xml.etree.ElementTree as ET

from conftest import NESTLAB, ROOT, run_cli

EXAMPLE = "examples/checks.yml"


def test_ten_checks_hold_and_a_broken_link_fails_exactly_its_checks(tmp_path):
    report = tmp_path / "checks.xml"
    try:
        done = run_cli("check", "-t", EXAMPLE, "--wait", "90", "--junit", str(report), "--format", "json", timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        results = json.loads(done.stdout)["checks"]
        assert len(results) == 10 and all(r["held"] and r["first_held"] is not None for r in results), results
        assert not ET.parse(report).getroot().findall("testcase/failure")

        assert run_cli("link", "set", "--lab", "checks", "r1:eth1", "r2:eth1", "--down").returncode == 0
        broken = run_cli("check", "--lab", "checks", "--wait", "5", "--junit", str(report), timeout=120)
        assert broken.returncode == 1, broken.stdout + broken.stderr
        failed = {case.get("name") for case in ET.parse(report).getroot().findall("testcase") if case.find("failure") is not None}
        assert failed == {
            "r1 routes 10.3.3.0/24 via 10.0.12.2",
            "r1 has OSPF neighbor 10.255.0.2 Full",
            "r1 has BGP peer 10.0.12.2 Established",
            "r2 has BGP peer 10.0.12.1 Established",
        }, failed
        assert "6 of 10 checks hold" in broken.stderr
    finally:
        run_cli("destroy", "--lab", "checks")


def test_bad_checks_are_file_errors(topo_file):
    shapes = topo_file(
        "name: {name}\ntopology:\n  nodes: {a: {}}\nchecks:\n  - reach: {from: a, to: a}\n"
        "  - rate: {from: a, to: a, mbit: 5, tolerance: lots}\n  - {reach: {from: a, to: a}, route: {node: a, prefix: 10.0.0.0/8}}\n"
    )
    refused = run_cli("check", "-t", str(shapes))
    assert refused.returncode == 2, refused.stderr
    assert "lab.yml:6:" in refused.stderr and "'lots' is not a tolerance" in refused.stderr, refused.stderr
    assert "lab.yml:7:" in refused.stderr and "a check is one of" in refused.stderr, refused.stderr
    ghost = topo_file("name: {name}\ntopology:\n  nodes: {a: {}}\nchecks:\n  - reach: {from: ghost, to: a}\n", "ghost.yml")
    refused = run_cli("check", "-t", str(ghost))
    assert refused.returncode == 2 and "ghost.yml:5:" in refused.stderr and "node 'ghost' is not under" in refused.stderr, (
        refused.stderr
    )


def _router(n: int, expensive: bool) -> str:
    """An OSPF router's frr.conf; ``expensive``: its eth2 (towards r4) costs 100.  SPF runs 200 ms after a
    change, so the failure costs an outage of about that, which the pings measure to 10 ms."""
    return (
        f"frr defaults traditional\nhostname r{n}\n!\ninterface eth1\n ip ospf hello-interval 1\n ip ospf dead-interval 4\n!\n"
        "interface eth2\n ip ospf hello-interval 1\n ip ospf dead-interval 4\n"
        + (" ip ospf cost 100\n" if expensive else "")
        + f"!\nrouter ospf\n ospf router-id 10.255.0.{n}\n network 10.0.0.0/8 area 0\n passive-interface eth3\n"
        " timers throttle spf 200 400 1000\n!\n"  # a reroute that waits 200 ms: an outage the pings see whole
    )


RING = """name: {name}
topology:
  nodes:
    r1: {kind: frr, startup-config: "R1"}
    r2: {kind: frr, startup-config: "R2"}
    r3: {kind: frr, startup-config: "R3"}
    r4: {kind: frr, startup-config: "R4"}
    h1: {exec: ["ip route add default via 10.1.1.1"]}
    h2: {exec: ["ip route add default via 10.3.3.1"]}
  links:
    - {endpoints: ["r1:eth1", "r2:eth1"], ipv4: ["10.0.12.1/24", "10.0.12.2/24"]}
    - {endpoints: ["r2:eth2", "r3:eth1"], ipv4: ["10.0.23.2/24", "10.0.23.3/24"]}
    - {endpoints: ["r1:eth2", "r4:eth1"], ipv4: ["10.0.14.1/24", "10.0.14.4/24"]}
    - {endpoints: ["r4:eth2", "r3:eth2"], ipv4: ["10.0.34.4/24", "10.0.34.3/24"]}
    - {endpoints: ["h1:eth1", "r1:eth3"], ipv4: ["10.1.1.10/24", "10.1.1.1/24"]}
    - {endpoints: ["h2:eth1", "r3:eth3"], ipv4: ["10.3.3.10/24", "10.3.3.1/24"]}
checks:
  - reach: {from: h1, to: h2}
schedule:
  - {at: 15s, link: ["r1:eth1", "r2:eth1"], state: down}
"""


def test_reconvergence_after_a_scheduled_failure_matches_the_traffic(topo_file, lab_name, tmp_path):
    """r1-r2 carries h1's traffic (the r4 side costs more); the schedule takes it down. The time `run` reports
    until the reach check holds again matches the outage timestamped pings see, within 0.2 s."""
    text = RING
    for n, expensive in ((1, True), (2, False), (3, True), (4, False)):
        text = text.replace(f'"R{n}"', json.dumps(_router(n, expensive)))
    path = topo_file(text)
    proc = subprocess.Popen(
        [*NESTLAB, "run", "-t", str(path)], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    pings = None
    log = tmp_path / "pings.txt"
    said: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            said.append(line)
            if "the schedule starts" in line or not line:
                break
        assert "the schedule starts" in said[-1], "".join(said)
        deadline = time.monotonic() + 14  # OSPF settles on the cheaper way, through r2, before the change at 15 s
        while "via 10.0.12.2" not in run_cli("exec", "--lab", lab_name, "r1", "--", "ip", "route", "get", "10.3.3.10").stdout:
            assert time.monotonic() < deadline, "r1 never routed through r2"
            time.sleep(0.5)
        ping = [
            "stdbuf",
            "-oL",
            "ping",
            "-D",
            "-n",
            "-i",
            "0.01",
            "-W",
            "0.2",
            "-c",
            "2000",
            "10.3.3.10",
        ]  # -w would end at an error
        pings = subprocess.Popen(
            [*NESTLAB, "exec", "--lab", lab_name, "h1", "--", *ping],
            stdout=log.open("w"),  # a file: a pipe nobody reads fills after ~13 s and stops the pings
        )
        said += proc.stderr.readlines()
        assert proc.wait(timeout=120) == 0, "".join(said)
        pings.wait(timeout=30)
        replies = [float(m.group(1)) for m in re.finditer(r"^\[(\d+\.\d+)\] \d+ bytes from", log.read_text(), re.M)]
    finally:
        proc.kill()
        if pings and pings.poll() is None:
            pings.kill()
    reported = re.search(r"every check holds again (\d+\.\d+) s later", "".join(said))
    assert reported, "".join(said)
    gaps = [(b - a, a, b) for a, b in zip(replies, replies[1:])]
    outage, last, first = max(gaps)
    assert outage > 0.15, (
        f"no outage seen by the pings ({len(replies)} replies, {replies[0]:.2f}-{replies[-1]:.2f}): {''.join(said)}"
    )
    print(f"reconvergence: reported {reported.group(1)} s, the pings' outage {outage:.3f} s")  # shown with -s
    assert abs(float(reported.group(1)) - outage) <= 0.2, (reported.group(0), outage)


EXEC_ADDRESSED = """name: {name}
topology:
  nodes:
    pc1: {exec: ["ip addr add 192.168.1.2/24 dev eth1", "ip route add 192.168.12.0/24 via 192.168.1.1",
                 "ip route add 192.168.13.0/24 via 192.168.1.1"]}
    r: {sysctls: {net.ipv4.ip_forward: 1},
        exec: ["ip addr add 192.168.1.1/24 dev eth1", "ip addr add 192.168.12.1/24 dev eth2", "ip addr add 192.168.13.1/24 dev eth3"]}
    pc2: {exec: ["ip addr add 192.168.12.2/24 dev eth1", "ip route add 192.168.1.0/24 via 192.168.12.1"]}
    pc3: {exec: ["ip addr add 192.168.13.3/24 dev eth1", "ip route add 192.168.1.0/24 via 192.168.13.1"]}
  links:
    - endpoints: ["pc1:eth1", "r:eth1"]
    - endpoints: ["r:eth2", "pc2:eth1"]
      params: {rate: 40mbit}
    - endpoints: ["r:eth3", "pc3:eth1"]
checks:
  - reach: {from: pc1, to: pc2}
  - rate: {from: pc1, to: pc2, mbit: 40, tolerance: 25%}
  - reach: {from: pc1, to: pc3}
  - latency: {from: pc1, to: pc3, ms: 0.5, tolerance: 5ms}
"""


def test_a_node_name_resolves_to_the_address_the_source_routes_to(topo_file, lab_name):
    """The hosts set their addresses in exec: (each link also has its automatic 10.200.0.x, which pc1 has no
    route to beyond its own segment): reach and rate by node name take 192.168.12.2, the address pc1's kernel
    routes to, and say so.  With r-pc2 down, exactly the checks across it fail, each quoting its tool."""
    path = topo_file(EXEC_ADDRESSED)
    done = run_cli("check", "-t", str(path), "--wait", "30", "--format", "json", timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout)["checks"]
    assert all(r["held"] for r in results), results
    assert results[0]["saw"] == "answered from 192.168.12.2 (pc2 is 192.168.12.2 (via 192.168.1.1, /24))", results[0]
    assert "Mbit/s to 192.168.12.2 (pc2 is 192.168.12.2 (via 192.168.1.1, /24))" in results[1]["saw"], results[1]
    assert "192.168.13.3" in results[2]["saw"] and "192.168.13.3" in results[3]["saw"], results

    assert run_cli("link", "set", "--lab", lab_name, "r:eth2", "pc2:eth1", "--down").returncode == 0
    time.sleep(1)  # the checks start well after the change
    broken = run_cli("check", "--lab", lab_name, "--wait", "4", "--format", "json", timeout=120)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    seen = {r["check"]: r for r in json.loads(broken.stdout)["checks"]}
    assert [i for i, r in seen.items() if not r["held"]] == [0, 1], seen
    assert seen[0]["saw"].endswith("1 packets transmitted, 0 received, 100% packet loss, time 0ms"), seen[0]
    said = seen[1]["saw"].split(": ", 1)[1]
    assert said.startswith("iperf3: error - ") and "{" not in said, seen[1]
    # a lab checked long after its last change: the first attempt held, and since when is unknown
    assert seen[2]["first_held"] is None and seen[2]["held_at_start"], seen[2]


def _ospf(n: int) -> str:
    return (
        f"frr defaults traditional\nhostname r{n}\n!\ninterface eth1\n ip ospf network point-to-point\n"
        " ip ospf hello-interval 1\n ip ospf dead-interval 3\n!\n"
        f"router ospf\n ospf router-id 10.255.0.{n}\n network 10.0.0.0/8 area 0\n!\n"
    )


DELAYED = """name: {name}
topology:
  nodes:
    r1: {kind: frr, startup-config: "R1"}
    r2: {kind: frr, startup-config: "R2"}
    sw: {kind: bridge}
  links:
    - {endpoints: ["r1:eth1", "sw:p1"], ipv4: ["10.0.12.1/24", null]}
    - {endpoints: ["sw:p2", "r2:eth1"], ipv4: [null, "10.0.12.2/24"]}
checks:
  - ospf: {node: r1, neighbor: 10.255.0.2, state: Full}
schedule:
  - {at: 3s, link: ["sw:p2", "r2:eth1"], state: down}
  - {at: 6.5s, link: ["sw:p2", "r2:eth1"], state: up}
"""


def test_a_change_whose_effect_comes_after_a_timer_is_timed_from_it(topo_file):
    """r2's side of the switch goes down; r1 keeps its carrier and drops r2 only when its dead interval (3 s)
    runs out: the check still holds when first tried after the change, and only counts once seen failing.
    The link is back 3.5 s after it went down, so the reconvergence is ~3.5 s plus the adjacency, never ~0."""
    text = DELAYED.replace('"R1"', json.dumps(_ospf(1))).replace('"R2"', json.dumps(_ospf(2)))
    done = subprocess.run([*NESTLAB, "run", "-t", str(topo_file(text))], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    print(done.stderr)  # shown with -s
    down = re.search(r"down: every check holds again (\d+\.\d+) s later \(.*failing from (\d+\.\d+) s", done.stderr)
    assert down, done.stderr
    again, failing = float(down.group(1)), float(down.group(2))
    assert 1.8 <= failing <= 3.4, done.stderr  # the dead interval, counted from r2's last hello (one a second)
    assert 3.5 <= again <= 7, done.stderr
    up = re.search(r"up: every check holds again (\d+\.\d+) s later \(.*failing from (\d+\.\d+) s", done.stderr)
    assert up and float(up.group(2)) < 0.2 and float(up.group(1)) < 3, done.stderr


CLAB_LINE = """name: {name}
topology:
  nodes:
    r1: {kind: linux, exec: ["ip addr add 10.0.12.1/24 dev eth1", "ip route add 10.0.23.0/24 via 10.0.12.2"]}
    r2: {kind: linux, sysctls: {net.ipv4.ip_forward: 1},
         exec: ["ip addr add 10.0.12.2/24 dev eth1", "ip addr add 10.0.23.2/24 dev eth2"]}
    r3: {kind: linux, exec: ["ip addr add 10.0.23.3/24 dev eth1", "ip route add 10.0.12.0/24 via 10.0.23.2"]}
  links:
    - {endpoints: ["r1:eth1", "r2:eth1"], params: {rate: 10mbit}}
    - {endpoints: ["r2:eth2", "r3:eth1"], params: {rate: 10mbit}}
checks:
  - reach: {from: r1, to: r3}
  - rate: {from: r1, to: r3, mbit: 10, tolerance: 30%}
"""


def test_a_node_name_never_resolves_to_the_management_network(topo_file, lab_name):
    """A containerlab file: every node's eth0 is on the one management bridge (172.20.20.0/24), directly
    connected to every other node.  Checks by name still take r3's data address, through r2, at the links'
    10 Mbit/s; with r2-r3 down both fail rather than holding over the management network."""
    path = topo_file(CLAB_LINE, "lab.clab.yml")
    done = run_cli("check", "-t", str(path), "--wait", "30", "--format", "json", timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    reach, rate = json.loads(done.stdout)["checks"]
    assert reach["held"] and reach["saw"] == "answered from 10.0.23.3 (r3 is 10.0.23.3 (via 10.0.12.2, /24))", reach
    assert rate["held"] and "Mbit/s to 10.0.23.3 (" in rate["saw"], rate
    mgmt = run_cli("exec", "--lab", lab_name, "r3", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0").stdout
    assert " 172.20.20." in mgmt, mgmt  # the management address the checks left out is there

    assert run_cli("link", "set", "--lab", lab_name, "r2:eth2", "r3:eth1", "--down").returncode == 0
    broken = run_cli("check", "--lab", lab_name, "--wait", "4", "--format", "json", timeout=120)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert [r["held"] for r in json.loads(broken.stdout)["checks"]] == [False, False], broken.stdout


def _fake_watch(probe, cheap: bool):
    from nestlab.verify import checks as C

    check = types.SimpleNamespace(kind="reach" if cheap else "latency", title=lambda: "r1 -> r9")
    return lambda lab, cs: [C._Watch(check, C.Result(0, "r1 -> r9", check.kind), probe, cheap)]


def test_a_check_first_tried_after_the_hold_window_and_failing_is_failed(monkeypatch):
    """A latency check queued behind a measurement (MEASURING) until after the hold window, failing every attempt,
    never held: recover() says so (not held, failed_at set) and the reconvergence reports it failing, not
    'no effect seen'."""
    from nestlab.verify import checks as C

    def failing():
        time.sleep(0.1)
        return False, "no answer from 10.0.0.9"

    monkeypatch.setattr(C, "_watches", _fake_watch(failing, cheap=False))
    monkeypatch.setattr(C, "HOLD", 1.0)

    def busy():
        with C.MEASURING:
            time.sleep(1.3)  # a rate test of the same change

    applied = time.time()
    blocker = threading.Thread(target=busy)
    blocker.start()
    time.sleep(0.05)
    result = C.recover(None, [None], applied, wait=2.0, hold=1.0)[0]
    blocker.join()
    assert not result.held and result.failed_at is not None and result.failed_at >= 1.0, result
    assert result.attempts >= 1 and result.saw == "no answer from 10.0.0.9", result

    said: list[str] = []
    blocker = threading.Thread(target=busy)
    blocker.start()
    time.sleep(0.05)
    watch = C.Reconvergence(None, [None], said.append, wait=2.0)
    watch.changed(applied := time.time(), "r1:eth1 down")
    assert watch.finish() == [None] and watch.no_effect == 0, said
    blocker.join()
    assert said == ["after r1:eth1 down: 1 of 1 checks do not hold again 2 s later: r1 -> r9"], said


def test_recover_reads_a_checks_attempts():
    """after_change() from recorded attempts (start, held, saw), 10 s hold window from the change at 100."""
    from nestlab.verify.checks import Result, after_change

    def read(*tried):
        return after_change(Result(0, "c", "reach"), list(tried), applied=100.0, hold=10.0)

    unaffected = read((101, True, "ok"), (105, True, "ok"), (111, False, "lost"))  # held all through the window
    assert unaffected.held and unaffected.failed_at is None and unaffected.saw == "ok", unaffected
    late = read((111, True, "ok"))  # first tried after the window, and held: nothing seen to fail
    assert late.held and late.failed_at is None, late
    never = read(*[(110.5 + i, False, "lost") for i in range(10)])  # the reviewer's case: all after the window, all failed
    assert not never.held and never.failed_at == 10.5 and never.first_held is None and never.saw == "lost", never
    late_fail = read((111, False, "lost"), (112, True, "ok"))  # first seen failing, then held: affected
    assert late_fail.held and late_fail.failed_at == 11 and late_fail.first_held == 12, late_fail
    recovered = read((101, True, "ok"), (102, False, "lost"), (103, False, "lost"), (104, True, "back"))
    assert recovered.held and recovered.failed_at == 2 and recovered.first_held == 4 and recovered.saw == "back", recovered
    untried = read()
    assert not untried.held and untried.saw == "not tried" and untried.attempts == 0, untried
