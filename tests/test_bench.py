"""The bench harness: parsers on real captured output, statistics on known values, the barrier,
a live rate measurement, `bench run`/`pingall`, and the lxc-modes suite end to end (report checked in Chromium)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from conftest import assert_every_cell_judged, run_cli

from nestlab.bench import stats, tools
from nestlab.bench.together import Pair, run_together

FIXTURES = Path(__file__).parent / "fixtures"


def test_sockperf_summaries_are_parsed_into_numbers():
    pp = tools.parse_sockperf((FIXTURES / "sockperf-ping-pong.txt").read_text())
    assert pp["latency_avg_us"] == 4.645 and pp["latency_std_us"] == 8.515
    assert pp["latency_p50_us"] == 4.376 and pp["latency_p99_us"] == 11.684 and pp["latency_p999_us"] == 44.385
    assert pp["latency_min_us"] == 2.775 and pp["latency_max_us"] == 1606.994
    assert pp["received"] == 165349 and pp["seconds"] == 1.55 and math.isclose(pp["pps"], 165349 / 1.55)
    tp = tools.parse_sockperf((FIXTURES / "sockperf-throughput.txt").read_text())
    assert tp == {"mode": "throughput", "pps": 344267.0, "mbps": 2689.586, "sent": 688692, "seconds": 2.0}
    ul = tools.parse_sockperf((FIXTURES / "sockperf-under-load.txt").read_text())
    assert ul["sent"] == 15201 and ul["received"] == 153 and ul["latency_p50_us"] == 21.551
    with pytest.raises(ValueError):
        tools.parse_sockperf("sockperf: ERROR: Connection refused")


def test_iperf3_and_ping_captures_are_parsed():
    tcp = tools.parse_iperf3((FIXTURES / "iperf3-tcp.json").read_text())
    raw = json.loads((FIXTURES / "iperf3-tcp.json").read_text())["end"]["sum_received"]["bits_per_second"]
    assert math.isclose(tcp["mbps"], raw / 1e6) and tcp["retransmits"] is not None and tcp["lost_pct"] is None
    intervals = tools.iperf3_intervals((FIXTURES / "iperf3-tcp.json").read_text())
    assert [round(s) for s, _, _ in intervals] == [0, 1] and abs(
        statistics.fmean(m for _, _, m in intervals) - tcp["mbps"]
    ) / tcp["mbps"] < 0.01
    udp = tools.parse_iperf3((FIXTURES / "iperf3-udp.json").read_text())
    assert udp["lost_pct"] is not None and 0 < udp["mbps"] <= 101
    ping = tools.parse_ping((FIXTURES / "ping.txt").read_text())
    assert ping["sent"] == 5 and ping["received"] == 5 and ping["rtt_avg_ms"] > 0


def test_statistics_against_known_values():
    s = stats.summarize([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s["mean"] == 5.0 and s["median"] == 4.5 and s["n"] == 8
    assert math.isclose(s["stdev"], 2.138089935, rel_tol=1e-6)  # sample standard deviation
    assert math.isclose(s["sem"], 2.138089935 / math.sqrt(8), rel_tol=1e-6)
    assert math.isclose(s["ci95_high"] - s["mean"], 2.365 * s["sem"], rel_tol=1e-9)  # t(7) = 2.365
    assert math.isclose(s["cv_pct"], 42.76179870, rel_tol=1e-6) and s["noisy"]
    assert "--reps" in stats.advice(s)
    quiet = stats.summarize([100.0, 101.0, 99.0])
    assert not quiet["noisy"] and stats.advice(quiet) == ""
    r = stats.ratio([10.0, 10.0, 10.0], [5.0, 5.0, 5.0])
    assert r == {"ratio": 2.0, "ci95_low": 2.0, "ci95_high": 2.0}
    r = stats.ratio([9.0, 11.0], [5.0, 5.0])
    assert r["ci95_low"] < 2.0 < r["ci95_high"]


PAIR = """
name: {name}
topology:
  nodes: {a: {}, b: {}, c: {}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["10.8.0.1/24", "10.8.0.2/24"]
      params: {rate: 100mbit}
    - endpoints: ["a:eth2", "c:eth1"]
      ipv4: ["10.8.1.1/24", "10.8.1.2/24"]
"""


@pytest.mark.throughput
def test_barrier_starts_pairs_together(lab_from):
    lab = lab_from(PAIR)
    a = lab.nodes["a"]
    ran = run_together([Pair(a, ["sleep", "0.1"]) for _ in range(10)], timeout=30)
    starts = [r.started_ns for r in ran]
    assert all(starts) and (max(starts) - min(starts)) / 1e6 < 50, starts


_LATE_TCP = "import socket,time; time.sleep(1); s=socket.socket(); s.bind(('10.8.0.2',7000)); s.listen(); c,_=s.accept(); c.sendall(b'tcp')"
_LATE_UDP = "import socket,time; time.sleep(1); s=socket.socket(type=socket.SOCK_DGRAM); s.bind(('10.8.0.2',7001)); _,a=s.recvfrom(9); s.sendto(b'udp',a)"
_ASK_TCP = "import socket; print(socket.create_connection(('10.8.0.2',7000), timeout=5).recv(9).decode())"
_ASK_UDP = "import socket; s=socket.socket(type=socket.SOCK_DGRAM); s.settimeout(5); s.sendto(b'?',('10.8.0.2',7001)); print(s.recv(9).decode())"


def test_clients_wait_until_their_servers_listen(lab_from):
    lab = lab_from(PAIR)
    a, b = lab.nodes["a"], lab.nodes["b"]
    ran = run_together(
        [
            Pair(a, ["python3", "-c", _ASK_TCP], b, ["python3", "-c", _LATE_TCP]),
            Pair(a, ["python3", "-c", _ASK_UDP], b, ["python3", "-c", _LATE_UDP]),
        ],
        timeout=30,
    )
    assert [(r.returncode, r.stdout) for r in ran] == [(0, "tcp\n"), (0, "udp\n")], [r.stderr for r in ran]
    started = time.monotonic()  # a server that dies is not waited for until the deadline
    (ran_,) = run_together([Pair(a, ["true"], b, ["false"])], timeout=30, listen_timeout=60)
    assert ran_.returncode == 0 and time.monotonic() - started < 30


@pytest.mark.throughput
def test_bench_run_measures_the_configured_rate_and_pingall(lab_from, lab_name):
    lab_from(PAIR)
    runs = []
    for cpu in (
        "0",
        str(os.cpu_count() - 1),
        "0",
    ):  # the best of three, pinned (--cpu): a host that steals CPU time starves HTB's dequeues at times
        result = run_cli(
            "bench",
            "run",
            "--lab",
            lab_name,
            "--from",
            "a",
            "--to",
            "b",
            "--tool",
            "iperf3",
            "--cpu",
            cpu,
            "--duration",
            "3",
            "--format",
            "json",
        )
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout)["mbps"])
        if runs[-1] >= 100 * 1448 / 1514 * 0.85:
            break
    assert 100 * 1448 / 1514 * 0.85 <= max(runs) and max(runs) <= 100 * 1.02, runs  # HTB counts whole frames
    result = run_cli(
        "bench", "run", "--lab", lab_name, "--from", "a", "--to", "b", "--tool", "sockperf", "--duration", "1", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    assert measured["pps"] > 0 and measured["latency_avg_us"] > 0
    result = run_cli("bench", "pingall", "--lab", lab_name)
    assert result.returncode == 1  # b and c are not connected to each other
    assert "a -> b c" in result.stdout and "b -> a X" in result.stdout and "33% dropped" in result.stdout


@pytest.mark.throughput
def test_lxc_modes_quick_suite_end_to_end(tmp_path):
    folder = tmp_path / "run"
    result = run_cli("bench", "lxc-modes", "--quick", "--out", str(folder), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((folder / "results.json").read_text())
    assert data["meta"]["kernel"] and data["meta"]["commands"] and not data["meta"]["interrupted"]
    assert_every_cell_judged(folder)
    modes = {row["mode"] for row in data["rows"]}
    assert {"none", "bridge", "macvlan"} <= modes
    assert all(row["pps"] > 0 and row["latency_avg_us"] > 0 for row in data["rows"] if row["pair"] != "all")
    assert (folder / "results.csv").read_text().startswith("mode,pairs,payload,placement,rep")
    assert len(list((folder / "raw").iterdir())) > 10
    ten = [
        row["pps_started_ns"]
        for row in data["rows"]
        if row["pairs"] == 10
        and row["pair"] != "all"
        and row["rep"] == 0
        and row["mode"] == "macvlan"
        and row["payload"] == 28
        and row["placement"] == "same"
    ]
    assert len(ten) == 10 and (max(ten) - min(ten)) / 1e6 < 50  # the ten pairs started together
    _check_report_in_chromium(folder / "report.html")
    again = run_cli("report", str(folder))
    assert again.returncode == 0, again.stderr
    compared = run_cli("compare", str(folder), str(folder), "--format", "json")
    assert compared.returncode == 0 and all(abs(r["ratio"] - 1) < 1e-9 for r in json.loads(compared.stdout))


def _check_report_in_chromium(report: Path) -> None:
    """Render the report in headless Chromium and check every figure and table is in the rendered page."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "the report test needs Debian's chromium (make deps installs it)"
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    for fig in (5, 7, 9, 11):  # --quick measures the paper's 28-byte figures
        section = re.search(rf'<section class="figure" id="fig{fig}">(.*?)</section>', dom, re.S)
        assert section, f"figure {fig} missing from the rendered report"
        body = section.group(1)
        assert "<svg" in body and 'class="ours"' in body and 'class="paper"' in body and "ranking" in body, (
            f"figure {fig} incomplete"
        )
    assert 'class="meta"' in dom


def test_ctrl_c_keeps_finished_cells_and_leaves_nothing(tmp_path):
    import signal
    import time

    from conftest import NESTLAB, ROOT, leftovers

    folder = tmp_path / "run"
    # SIGINT as a terminal delivers it: with the default action, even where a launcher made it ignored.
    proc = subprocess.Popen(
        [*NESTLAB, "bench", "lxc-modes", "--quick", "--out", str(folder)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not list(folder.glob("raw/*ping-pong*pair0*")):  # the first cell's last measurement is in
            assert time.monotonic() < deadline and proc.poll() is None, "no cell finished"
            time.sleep(0.2)
        time.sleep(1.5)  # the next cell is being measured: interrupt it
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave a run going on behind the suite
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-2000:]
    data = json.loads((folder / "results.json").read_text())
    assert data["meta"]["interrupted"] and data["rows"], "finished cells are kept"
    assert (folder / "report.html").exists()
    assert leftovers() == [], "the lab was destroyed"
    assert "interrupted" in stderr


def test_kernel_modules_suite_builds_every_cell_and_judges_claims():
    from nestlab.bench import report
    from nestlab.bench.scenario import cells
    from nestlab.bench.suites import SUITES

    suite = SUITES["kernel-modules"]
    for cell in cells(suite.axes):
        if not (cell["pairs"] > 4 or suite.unavailable(cell)):
            assert suite.build(cell).plan.nodes  # every topology of the matrix is valid
    fig = next(f for f in suite.figures if f.id == "fig5-1-mtu1500")
    ours = {
        ("macvlan", 1): stats.summarize([29.9, 30.0, 30.1]),
        ("veth-bridge-nf", 1): stats.summarize([9.9, 10.0, 10.1]),
        ("ovs", 1): stats.summarize([5.0, 5.0, 5.0]),
    }
    assert "ranking agrees" in report.agreement(fig, ours)[0]
    ours[("veth-bridge-nf", 1)] = stats.summarize([39.9, 40.0, 40.1])
    assert "ranking differs" in report.agreement(fig, ours)[0]
    ours[("veth-bridge-nf", 1)] = stats.summarize([25.0, 35.0, 45.0])  # above macvlan, but their 95 % intervals overlap
    assert "ranking undecided" in report.agreement(fig, ours)[0]
    close = next(f for f in suite.figures if f.id == "fig5-3-mtu9000")
    assert "claims no ranking" in report.agreement(close, ours)[0]


@pytest.mark.throughput
def test_nested_suite_measures_each_experiment_nested_and_flat(tmp_path):
    """A slice of `nestlab bench nested`: every experiment's measurement runs, nested and flat, and its figure is drawn."""
    import dataclasses

    from nestlab.bench import results, scenario
    from nestlab.bench.suites import SUITES

    suite = SUITES["nested"]
    both = ["nested", "flat"]
    axes = [
        {"experiment": ["intra"], "nesting": both, "connections": [2]},
        {"experiment": ["inter"], "nesting": both, "connections": [1]},
        {"experiment": ["stress"], "nesting": both},
        {"experiment": ["scale"], "nesting": ["nested"], "iphys": [5]},
        {"experiment": ["startup"], "nesting": both, "size": ["12x4"]},
    ]
    folder = scenario.run(dataclasses.replace(suite, quick_axes=axes), tmp_path / "run", quick=True, reps=1)
    _, rows = results.load(folder)
    assert not [r for r in rows if r.get("error")]
    assert_every_cell_judged(folder)
    for experiment, pairs in (("intra", 2), ("inter", 1)):
        for nesting in both:
            links = [r for r in rows if r["experiment"] == experiment and r["nesting"] == nesting and r["pair"] != "all"]
            assert len(links) == pairs and all(r["gbps"] > 0.1 and 0 < r["rtt_ms"] < 50 for r in links), links
    stress = {r["nesting"]: r for r in rows if r["experiment"] == "stress" and r["pair"] == "all"}
    for nesting, row in stress.items():
        assert row["t1_gbps"] > 0 and row["t2_gbps"] > 0 and row["background_gbps"] > 0, row
        assert row["degradation_pct"] == pytest.approx(100 * (row["t1_gbps"] - row["t2_gbps"]) / row["t1_gbps"])
        series = [r for r in rows if r["experiment"] == "stress" and r["nesting"] == nesting and r["pair"] == 0]
        assert len(series) >= 24 and series[-1]["t_s"] > row["background_s"][1]  # the whole run, past the load
    scale = [r for r in rows if r["experiment"] == "scale" and r["pair"] != "all"]
    assert len(scale) == 10 and {r["drone"] for r in scale} == {1, 2} and all(r["gbps"] > 0 for r in scale)
    startup = {r["nesting"]: r for r in rows if r["experiment"] == "startup"}
    # Nested drones hold 5 network stacks and cgroups each where flat ones hold one: slower to start and larger.
    assert startup["nested"]["startup_s"] > startup["flat"]["startup_s"] > 0
    assert startup["nested"]["memory_per_node_mb"] > startup["flat"]["memory_per_node_mb"] > 0
    page = (folder / "report.html").read_text()
    for fig in suite.figures:
        assert f'id="{fig.id}"' in page and "No measurements" not in page.split(f'id="{fig.id}"')[1].split("</section>")[0], (
            fig.id
        )
