"""Link shaping: rates measured with iperf3, live changes, up/down, netem (VM tier), bad values."""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import machine
import pytest
from conftest import NESTLAB, ROOT, run_cli
from netcheck import echo, iqr, ping, rtts

from nestlab.backends.kernel import shaping
from nestlab.bench import tools

PAIR = """name: {name}
topology:
  nodes: {a: {}, b: {}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
PARAMS
"""


def pair(params: str = "") -> str:
    return PAIR.replace("PARAMS", f"      params: {params}" if params else "")


@pytest.mark.throughput
@pytest.mark.parametrize("mbit", [10, 100, 1000])
def test_rate_is_what_iperf3_measures(lab_from, mbit):
    lab = lab_from(pair(f"{{rate: {mbit}mbit}}"))
    a, b = lab.nodes["a"], lab.nodes["b"]
    # HTB counts whole frames (1514 bytes for a full TCP segment carrying 1448 bytes of payload with
    # timestamps), so what iperf3 can see on a link of RATE is RATE x 1448/1514.
    goodput = mbit * 1448 / 1514
    # 5 s after a 1 s warm-up, both iperf3 ends (and so the whole path: veth and HTB run in the sender's
    # softirq) pinned to the stall probe's CPU.  A shaper kept from running catches up by its burst
    # (20 ms by default), so every stall seen there beyond that is time the link could not carry
    # anything: a link of RATE must give RATE x the rest.  A busy machine can only slow a run down, so
    # the best of up to four runs counts; if even that falls short, the same shaper set to 4x the rate
    # is measured in between: what this machine could carry through HTB at those moments.
    link, ip = lab.link("a:eth1", "b:eth1"), b.intf("eth1").ip
    burst_s = shaping.burst_for(mbit * 10**6) * 8 / (mbit * 10**6)
    runs, capacity = [], []  # runs: (Mbit/s, what the stalls left of the goodput)

    def good(run: tuple[float, float]) -> bool:
        return run[0] >= 0.95 * min(run[1], max(capacity, default=goodput))

    for _ in range(4):
        with machine.probe() as stalls:
            mbps = tools.iperf3(a, b, ip, seconds=5, omit=1, cpu=machine.CPU)["mbps"]
            end = time.time()
        start = end - 5.3  # the measured 5 s, and the client's wrap-up
        lost = stalls.beyond(start, end, grace=burst_s)
        runs.append((mbps, goodput * (1 - lost / 5)))
        if good(runs[-1]):
            break
        link.set(rate=f"{4 * mbit}mbit")
        capacity.append(tools.iperf3(a, b, ip, seconds=5, omit=1, cpu=machine.CPU)["mbps"])
        link.set(rate=f"{mbit}mbit")
    measured = max(mbps for mbps, _ in runs)
    assert measured <= goodput * 1.05, (
        f"{measured:.1f} Mbit/s (runs: {runs}) on a {mbit} Mbit/s link: the shaper lets too much through"
    )
    assert any(good(run) for run in runs), (
        f"{measured:.1f} Mbit/s on a {mbit} Mbit/s link (expected {goodput:.1f}; runs as (measured, what the machine's "
        f"stalls left of that): {runs}; the same shaper at {4 * mbit} Mbit/s carried {capacity} in between)"
    )


def test_rates_above_32_bits_are_kept(lab_from):
    lab = lab_from(pair("{rate: 20gbit}"))
    shown = json.loads(run_cli("link", "show", "--lab", lab.name, "--format", "json", check=True).stdout)
    assert {k["rate_bps"] for k in shown[0]["kernel"].values()} == {20 * 10**9}
    lab.link("a:eth1", "b:eth1").set(rate="10mbit", direction="a")
    shown = json.loads(run_cli("link", "show", "--lab", lab.name, "--format", "json", check=True).stdout)
    assert sorted(k["rate_bps"] for k in shown[0]["kernel"].values()) == [10**7, 20 * 10**9]
    assert {k["state"] for k in shown[0]["kernel"].values()} == {"up"}


@pytest.mark.throughput
def test_live_rate_step_shows_within_one_interval(lab_from):
    lab = lab_from(pair("{rate: 100mbit}"))
    a, b = lab.nodes["a"], lab.nodes["b"]
    ip = b.intf("eth1").ip
    server = b.popen(["iperf3", "-s", "-1", "-B", ip], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        timer = threading.Timer(3.0, lambda: lab.link("a:eth1", "b:eth1").set(rate="10mbit"))
        timer.start()
        out = a.cmd(["iperf3", "-J", "-c", ip, "-t", "6"], timeout=30)
        timer.join()
    finally:
        server.kill()
        server.wait()
    rates = [i["sum"]["bits_per_second"] / 1e6 for i in json.loads(out)["intervals"]]
    # Before the change the link carries well above the new rate (a host that steals CPU keeps HTB below
    # its 95.6 Mbit/s goodput at times: 77-84 seen here); one interval after the change at t=3 s, and
    # later, the new 10 Mbit/s ceiling holds.
    assert all(r < 15 for r in rates[4:]), rates
    assert all(r > 50 and r > 4 * max(rates[4:]) for r in rates[:2]), rates
    assert any(e["what"]["set"] == {"rate": "10mbit"} for e in _events(lab))


def _trace(path, pattern: list[tuple[int, float]]) -> None:
    """A Mahimahi trace: (milliseconds, Mbit/s) segments, delivery opportunities spread evenly in each, the
    last at the segment's end (so the last line, Mahimahi's period, is the pattern's length)."""
    lines, start = [], 0
    for ms, mbit in pattern:
        count = int(mbit * 1e6 / 12000 * ms / 1000)
        lines += [start + (k + 1) * ms // count for k in range(count)]
        start += ms
    path.write_text("\n".join(map(str, sorted(lines))) + "\n")


TRACED = (
    "name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n"
    '    - {endpoints: ["a:eth1", "b:eth1"], ipv4: ["10.9.0.1/24", "10.9.0.2/24"], params: {a: {trace: TRACE}}}\n'
)


def _on_off(path) -> None:
    """500 ms at 2 opportunities per ms (24 Mbit/s), then silent until the last line at 1000 ms: 12 Mbit/s."""
    path.write_text("\n".join([str(ms) for ms in range(500) for _ in range(2)] + ["1000"]) + "\n")


def _delivered(lab, step: float, count: int) -> tuple[list[float], float]:
    """IP bytes b:eth1 received in ``count`` windows of ``step`` s, sampled on the trace's clock (its player's
    known start): the windows' Mbit/s, and where in the trace (s since its start) the first window began."""
    from nestlab import names
    from nestlab.backends.kernel import rtdump
    from nestlab.backends.services import traceplay

    start = traceplay.health(lab.name, "a", "eth1")["start"]
    first = start + math.ceil(time.time() - start + 0.5)  # a whole second of the trace, half a second from now

    def ip_bytes() -> int:
        (eth1,) = [i for i in rtdump.of_namespace(names.netns_path(lab.name, "b")) if i.name == "eth1"]
        return eth1.rx_bytes - 14 * eth1.rx_packets

    got = []
    for k in range(count + 1):
        time.sleep(max(0.0, first + k * step - time.time()))
        got.append(ip_bytes())
    return [(b - a) * 8 / step / 1e6 for a, b in zip(got, got[1:])], first - start


def _expected(times: list[int], offset: float, step: float, count: int) -> list[float]:
    """Mbit/s the trace delivers (1500 bytes per line, looping with the period of its last line) in ``count``
    windows of ``step`` s from ``offset`` s of the trace."""
    period, out = times[-1], []
    for k in range(count):
        lo, hi = (offset + k * step) * 1000, (offset + (k + 1) * step) * 1000
        lines = sum(1 for loop in range(int(lo // period), int(hi // period) + 1) for t in times if lo < loop * period + t <= hi)
        out.append(lines * 1500 * 8 / step / 1e6)
    return out


@pytest.mark.throughput
def test_tcp_over_an_on_off_trace_gets_its_mean(topo_file, tmp_path):
    """500 ms at 24 Mbit/s, 500 ms silent: packets wait out the silence in the link's queue and leave at the
    next opportunities (as Mahimahi's), so 12 s of TCP get 10.5-12.6 Mbit/s (the trace's mean is 12; an HTB
    class whose rate followed the trace gave 2.0-2.3)."""
    from nestlab.lab.lab import Lab

    _on_off(tmp_path / "onoff.trace")
    lab = Lab.from_file(topo_file(TRACED.replace("TRACE", "onoff.trace")))
    lab.deploy()
    try:
        server = lab.nodes["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        out = lab.nodes["a"].cmd(["iperf3", "-c", "10.9.0.2", "-t", "12", "-J"], timeout=60)
        server.wait(timeout=10)
    finally:
        lab.destroy()
    goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    assert 10.5 <= goodput <= 12.6, goodput


@pytest.mark.throughput
@pytest.mark.parametrize(
    ("pattern", "step"),
    [("on-off", 0.5), ([(1000, 4), (1000, 8), (1000, 12), (1000, 16), (1000, 20)], 1.0)],
    ids=["on-off", "ramp"],
)
def test_udp_follows_the_trace_window_by_window(topo_file, tmp_path, pattern, step):
    """UDP offered at 30 Mbit/s (more than the trace ever gives) arrives, in each window of the trace's own clock,
    at what the trace delivers in it within 10 % of its peak: on/off by half-second (24 then 0 Mbit/s) and by
    second (12), a ramp 4-8-12-16-20 Mbit/s by second."""
    from nestlab.lab.lab import Lab
    from nestlab.model.trace import read

    trace = tmp_path / "t.trace"
    _on_off(trace) if pattern == "on-off" else _trace(trace, pattern)
    lab = Lab.from_file(topo_file(TRACED.replace("TRACE", "t.trace")))
    lab.deploy()
    try:
        server = lab.nodes["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        client = lab.nodes["a"].popen(["iperf3", "-c", "10.9.0.2", "-u", "-b", "30M", "-t", "14"], stdout=subprocess.DEVNULL)
        measured, offset = _delivered(lab, step, int(10 / step))
        client.wait(timeout=30)
        server.wait(timeout=10)
    finally:
        lab.destroy()
    expected = _expected(read(str(trace)), offset, step, len(measured))
    peak = max(expected)
    assert all(abs(m - e) <= 0.1 * peak for m, e in zip(measured, expected)), list(zip(measured, expected))
    seconds = [statistics.fmean(measured[k : k + int(1 / step)]) for k in range(0, len(measured), int(1 / step))]
    wanted = [statistics.fmean(expected[k : k + int(1 / step)]) for k in range(0, len(expected), int(1 / step))]
    assert all(abs(m - e) <= 0.1 * e for m, e in zip(seconds, wanted)), list(zip(seconds, wanted))


@pytest.mark.throughput
def test_mahimahis_published_cellular_trace_runs_unchanged(topo_file, tmp_path):
    """Mahimahi's ATT-LTE-driving-2016.up (0 to 12.8 Mbit/s from second to second), unchanged: 20 s of UDP
    offered at 20 Mbit/s arrive, second by second on the trace's own clock (its player's known start), at the
    rate the trace gives (correlation > 0.8), and on average within 5 % of the trace's average over those 20 s."""
    from nestlab.lab.lab import Lab
    from nestlab.model.trace import read

    trace = Path(__file__).parent / "fixtures" / "mahimahi" / "ATT-LTE-driving-2016.up"
    lab = Lab.from_file(topo_file(TRACED.replace("TRACE", str(trace))))
    lab.deploy()
    try:
        server = lab.nodes["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        client = lab.nodes["a"].popen(["iperf3", "-c", "10.9.0.2", "-u", "-b", "20M", "-t", "23"], stdout=subprocess.DEVNULL)
        measured, offset = _delivered(lab, 1.0, 20)
        client.wait(timeout=30)
        server.wait(timeout=10)
    finally:
        lab.destroy()
    expected = _expected(read(str(trace)), offset, 1.0, 20)
    assert statistics.correlation(measured, expected) > 0.8, list(zip(measured, expected))
    mean = statistics.fmean(expected)
    assert abs(statistics.fmean(measured) - mean) <= 0.05 * mean, (statistics.fmean(measured), mean, measured)


def _players(lab_name: str, node: str) -> list[str]:
    from nestlab import names
    from nestlab.backends.kernel import namespaces, procs

    inode = namespaces.inode(names.netns_path(lab_name, node))
    found = [procs.cmdline(pid).decode() for pid in procs.in_namespaces({inode}, ("net",))]
    return [c for c in found if "traceplay" in c]


@pytest.mark.throughput
def test_link_set_trace_replays_it_live_and_rate_ends_it(lab_from, lab_name, tmp_path):
    """`link set --trace` on a running unshaped link: UDP offered at 60 Mbit/s arrives at the trace's
    average (20 Mbit/s) within 5 %; another trace replaces the player, --rate ends it, a bad file exits 2."""
    lab = lab_from(pair())
    _trace(tmp_path / "alt.trace", [(1000, 10), (1000, 30)])
    _trace(tmp_path / "flat.trace", [(1000, 5)])
    done = run_cli(
        "link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--direction", "a", "--trace", str(tmp_path / "alt.trace")
    )
    assert done.returncode == 0, done.stderr
    assert len(_players(lab_name, "a")) == 1 and not _players(lab_name, "b")
    server = lab.nodes["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    ip = lab.nodes["b"].intf("eth1").ip
    out = lab.nodes["a"].cmd(["iperf3", "-c", ip, "-u", "-b", "60M", "-t", "8", "-J"], timeout=60)
    server.wait(timeout=10)
    average = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    assert abs(average - 20) <= 1.0, average
    assert (
        run_cli(
            "link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--direction", "a", "--trace", str(tmp_path / "flat.trace")
        ).returncode
        == 0
    )
    (player,) = _players(lab_name, "a")
    assert "flat.trace" in player
    assert run_cli("link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--direction", "a", "--rate", "50mbit").returncode == 0
    assert not _players(lab_name, "a")
    (shown,) = json.loads(run_cli("link", "show", "--lab", lab_name, "a:eth1", "b:eth1", "--format", "json").stdout)
    assert shown["sends"]["a:eth1"] == {"rate": "50mbit"} and shown["kernel"]["a:eth1"]["rate_bps"] == 50_000_000, shown
    (tmp_path / "bad.trace").write_text("7\n2\n")
    refused = run_cli("link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--trace", str(tmp_path / "bad.trace"))
    assert refused.returncode == 2 and "line 2 is not a time in ms" in refused.stderr, refused.stderr


def test_bad_trace_is_a_file_error(topo_file, tmp_path):
    (tmp_path / "bad.trace").write_text("5\n3\n")
    path = topo_file(
        "name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n"
        '    - {endpoints: ["a:eth1", "b:eth1"], params: {trace: bad.trace}}\n'
        '    - {endpoints: ["a:eth2", "b:eth2"], params: {trace: missing.trace}}\n'
    )
    refused = run_cli("deploy", "-t", str(path))
    assert refused.returncode == 2, refused.stderr
    assert "lab.yml:5:" in refused.stderr and "line 2 is not a time in ms" in refused.stderr, refused.stderr
    assert "lab.yml:6:" in refused.stderr and "No such file" in refused.stderr, refused.stderr


def test_down_then_up_keeps_tcp_connections(lab_from):
    lab = lab_from(pair())
    a, b = lab.nodes["a"], lab.nodes["b"]
    ip = b.intf("eth1").ip
    link = lab.link("a:eth1", "b:eth1")
    # A TCP connection that lives across a 1 s outage: the client sends, waits, sends again.
    server = b.popen(["python3", "-c", _ECHO_TWICE, ip], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    client = a.popen(["python3", "-c", _SEND_TWICE, ip], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    link.set(state="down")
    assert not ping(a, ip)
    time.sleep(1.0)
    link.set(state="up")
    assert client.wait(timeout=30) == 0
    assert client.stdout.read().split() == ["ONE", "TWO"]
    server.wait(timeout=5)
    assert ping(a, ip)
    states = [e["what"]["state"] for e in _events(lab)]
    assert states == ["down", "up"]


def test_deploy_reconciles_params_in_place(topo_file):
    from nestlab import Lab

    path = topo_file(pair("{rate: 100mbit}"))
    lab = Lab.from_file(path)
    try:
        lab.deploy()
        index = lab.nodes["a"].cmd("ip -o link show eth1").split(":")[0]
        path.write_text(path.read_text().replace("rate: 100mbit", "rate: 50mbit"))
        changes = Lab.from_file(path).deploy().changes
        assert (len(changes.reshape), changes.add_links, changes.del_links) == (1, [], [])
        assert lab.nodes["a"].cmd("ip -o link show eth1").split(":")[0] == index, "the link must not be recreated"
        assert "rate 50Mbit" in lab.nodes["a"].cmd("tc class show dev eth1")
    finally:
        lab.destroy()


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--rate", "-5mbit", "is not a rate such as 100mbit"),
        ("--loss", "150%", "is outside 0..100%"),
        ("--rate", "10furlongs", "is not a rate such as 100mbit"),
        ("--delay", "20", "is not a time such as 20ms"),
    ],
)
def test_bad_values_are_clear_errors(lab_from, option, value, message):
    lab = lab_from(pair())
    result = run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth1", option, value)
    assert result.returncode == 2 and message in result.stderr and option.strip("-") in result.stderr, result.stderr


def test_link_set_from_the_shell_goes_the_quick_way_and_falls_back_to_say_what_is_wrong(lab_from):
    """`nestlab link set --lab` loads neither typer, rich nor pydantic (cli/quick.py), and applies what the full command would;
    what it does not take goes to the full command, which says what is wrong."""
    lab = lab_from(pair())
    script = (
        "import sys; from nestlab.cli import quick; code = quick.link_set(sys.argv[1:]); "
        "print(code, sorted(m for m in ('typer', 'rich', 'pydantic') if m in sys.modules))"
    )
    quick = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "--lab",
            lab.name,
            "b:eth1",
            "a:eth1",
            "--rate=30mbit",
            "--queue",
            "40",
            "--direction",
            "a",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert quick.stdout.split(None, 1) == ["0", "[]\n"], quick.stdout + quick.stderr
    assert "rate=30mbit, queue=40 applied in" in quick.stderr
    shown = json.loads(run_cli("link", "show", "--lab", lab.name, "--format", "json", check=True).stdout)[0]
    assert shown["kernel"]["b:eth1"]["rate_bps"] == 30_000_000 and shown["kernel"]["b:eth1"]["queue"] == 40, shown
    assert shown["kernel"]["a:eth1"].get("rate_bps") != 30_000_000, "--direction a is what b:eth1 (named first) sends"
    far = lab.nodes["b"].intf("eth1").ip
    assert ping(lab.nodes["a"], far)
    assert run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth1", "--down").returncode == 0
    assert not ping(lab.nodes["a"], far), "down through the quick way"
    for args, code, says in (
        (["--rate", "10furlongs"], 2, "rate: '10furlongs' is not a rate"),
        (["--queue", "0"], 2, "queue"),
        (["--up", "--down"], 1, "not both"),
        (["--rate", "1mbit", "-t", "x.yml"], 1, "not both"),
    ):
        result = run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth1", *args)
        assert result.returncode == code and says in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
    assert run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth9", "--rate", "1mbit").returncode == 1


def test_inspect_json_from_the_shell_goes_the_quick_way_and_prints_the_full_commands_report(lab_from):
    """`nestlab inspect --lab NAME --format json` loads neither typer, rich nor pydantic (cli/quick_inspect.py) and
    prints the report the full command prints; what it does not take goes to the full command."""
    lab = lab_from(pair())
    quick = subprocess.run(
        [sys.executable, "-X", "importtime", *NESTLAB[1:], "inspect", "--format=json", "--lab", lab.name],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in quick.stderr.splitlines() if line.startswith("import time:")}
    assert "nestlab" in loaded and not loaded & {"typer", "rich", "pydantic"}, sorted(loaded)
    full = run_cli("inspect", "--lab", lab.name, "--format", "json", "--per-page", "50", check=True)  # not the quick way
    assert quick.stdout == full.stdout  # byte for byte: one printer (cli/jsonout.py)
    assert [n["name"] for n in json.loads(quick.stdout)["nodes"]] == ["a", "b"]
    missing = run_cli("inspect", "--lab", "nosuchlab", "--format", "json")
    assert missing.returncode == 1 and "no lab named 'nosuchlab'" in missing.stderr, missing.stderr


def test_bad_params_in_the_file_name_the_field(topo_file):
    path = topo_file(pair("{rate: 100mbit, loss: 200%}"))
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2
    assert ":6:37: topology.links[0].params.loss: '200%' is outside 0..100%" in result.stderr, result.stderr


@pytest.mark.throughput
@pytest.mark.kernel("netem")
def test_gemodel_loses_in_bursts_at_its_stationary_rate(lab_from):
    """Gilbert-Elliott '5% 20%' (`link set --gemodel`): 20 % of the pings lost, as p / (p + r) says, in runs
    averaging about 1 / r = 5 (independent 20 % loss would average 1.25); the kernel has the model."""
    lab = lab_from(pair())
    ip = lab.nodes["b"].intf("eth1").ip
    done = run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth1", "--direction", "a", "--gemodel", "5% 20%")
    assert done.returncode == 0, done.stderr
    out = lab.nodes["a"].cmd(["ping", "-n", "-c", "3000", "-i", "0.002", "-W", "1", ip], timeout=120)
    seen = {int(m) for m in re.findall(r"icmp_seq=(\d+)", out)}
    lost = [seq not in seen for seq in range(1, 3001)]
    runs = [len(list(group)) for is_lost, group in itertools.groupby(lost) if is_lost]
    assert 12 <= 100 * sum(lost) / len(lost) <= 28, sum(lost)
    assert statistics.fmean(runs) >= 2.5, runs
    refused = run_cli("link", "set", "--lab", lab.name, "a:eth1", "b:eth1", "--gemodel", "5%")
    assert refused.returncode == 2 and "P R [1-H [1-K]]" in refused.stderr, refused.stderr


@pytest.mark.kernel("netem")
def test_netem_delay_loss_jitter(lab_from):
    lab = lab_from(pair())
    a, b = lab.nodes["a"], lab.nodes["b"]
    ip = b.intf("eth1").ip
    link = lab.link("a:eth1", "b:eth1")
    base = tools.ping(a, ip, count=20, interval=0.05)["rtt_min_ms"]  # this machine's own RTT (slow under emulation)
    base_median = statistics.median(rtts(a, ip))
    link.set(delay="20ms")
    rtt = tools.ping(a, ip, count=20, interval=0.05)
    assert 38 <= rtt["rtt_min_ms"] - base <= 42, (base, rtt)  # 20 ms each way
    link.set(delay="none")
    link.set(loss="10%", direction="a")
    lost = tools.ping(a, ip, count=2000, interval=0.002)["loss_pct"]
    assert 7 <= lost <= 13, lost
    # Jitter: judged on the median and quartiles of each RTT, since an emulated VM's own timer noise
    # adds outliers that would swamp an average or a maximum.
    link.set(loss="none", delay="10ms", jitter="5ms", direction="a")
    uniform = rtts(a, ip)
    assert 7 <= statistics.median(uniform) - base_median <= 13 and iqr(uniform) > 2, (base_median, uniform)
    link.set(distribution="normal", direction="a")  # tc's normal.dist: jitter becomes a standard deviation
    normal = rtts(a, ip)
    assert 7 <= statistics.median(normal) - base_median <= 13 and iqr(normal) > 2, (base_median, normal)
    assert "normal" in json.dumps(link.show()["sends"])
    assert echo(b, a, ip).startswith("HELLO")


def _events(lab) -> list[dict]:
    from nestlab.engine import events

    return events.read(lab.name)


_ECHO_TWICE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 7010)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
for _ in range(2):
    c.sendall(c.recv(16).upper())
"""
_SEND_TWICE = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7010), timeout=20)
s.sendall(b"one"); print(s.recv(16).decode())
time.sleep(2.5)  # the link is down for 1 s in between
s.sendall(b"two"); print(s.recv(16).decode())
"""


@pytest.mark.throughput
def test_schedule_is_played_on_time_and_logged(topo_file):
    text = pair("{rate: 100mbit}") + (
        "schedule:\n"
        '  - {at: 0.5s, link: ["a:eth1", "b:eth1"], set: {rate: 10mbit}}\n'
        '  - {at: 1s, link: ["b:eth1", "a:eth1"], state: down}\n'
        '  - {at: 1.5s, link: ["a:eth1", "b:eth1"], state: up}\n'
    )
    path = topo_file(text)
    # The player shares one CPU with a probe of the machine's stalls (see machine.py).
    with machine.probe() as stalled:
        result = subprocess.run(
            [*NESTLAB, "run", "-t", str(path), "--keep", "--loops", "3"],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=machine.pin,
        )
    assert result.returncode == 0, result.stderr
    from nestlab import Lab
    from nestlab.engine import events

    lab = Lab.from_file(path)
    try:
        logged = events.read(lab.name)
        assert [(e["what"]["set"], e["what"]["state"]) for e in logged] == [
            ({"rate": "10mbit"}, None),
            ({}, "down"),
            ({}, "up"),
        ] * 3
        loops = [logged[i : i + 3] for i in (0, 3, 6)]
        for loop in loops:
            starts = [e["scheduled"] for e in loop]
            assert [round(s - starts[0], 3) for s in starts] == [0.0, 0.5, 1.0]
        # Each change is issued within 5 ms of its time.  The log's applied time is when the kernel
        # had it, so the kernel's own time comes off (taking a link down waits for an RCU grace
        # period, which a busy VM stretches to tens of ms).  A shared machine can take the CPU away
        # for longer at any moment: lateness beyond 5 ms counts only where the probe on the same CPU
        # saw no stall as long at that moment.
        for e in logged:
            late = e["applied"] - e["latency_ms"] / 1000 - e["scheduled"]
            stolen = stalled.longest_within(e["scheduled"], e["scheduled"] + late)
            assert -0.0005 <= late <= 0.005 + stolen, (
                f"issued {late * 1000:.1f} ms late; the machine stalled {stolen * 1000:.1f} ms then ({e})"
            )
        assert all(e["latency_ms"] < 1000 for e in logged), logged
        assert "rate 10Mbit" in lab.nodes["a"].cmd("tc class show dev eth1")
    finally:
        lab.destroy()


def test_schedule_removes_and_adds_links_and_stops_nodes(topo_file):
    text = PAIR.replace("PARAMS", "      params: {rate: 50mbit}") + (
        '    - endpoints: ["a:eth2", "b:eth2"]\n'
        "schedule:\n"
        '  - {at: 0.3s, link: ["a:eth1", "b:eth1"], action: remove}\n'
        "  - {at: 1.0s, node: b, action: stop}\n"
        "  - {at: 2.0s, node: b, action: start}\n"
        '  - {at: 2.4s, link: ["a:eth1", "b:eth1"], action: add}\n'
    )
    from nestlab import Lab

    lab = Lab.from_file(topo_file(text))
    try:
        lab.deploy()
        sleeper = lab.nodes["b"].popen(["sleep", "30"])
        from nestlab.lab.schedule import play

        seen = []

        def watch():  # each look is 350-500 ms after a change: a busy VM can take 100 ms+ to delete a veth
            start = time.monotonic()
            time.sleep(0.65)
            seen.append(("eth1" in lab.nodes["a"].cmd("ip -br link"), _proc_state(sleeper.pid)))
            time.sleep(max(0.0, start + 1.5 - time.monotonic()))
            state = _proc_state(sleeper.pid)
            seen.append(("DOWN" in lab.nodes["b"].cmd("ip -br link show eth2"), state))

        watcher = threading.Thread(target=watch)
        watcher.start()
        play(lab)
        watcher.join()
        assert seen[0] == (False, "S")  # link removed, b still running
        assert seen[1] == (True, "T")  # b stopped: its interfaces are down, its processes frozen
        assert _proc_state(sleeper.pid) == "S"
        assert ping(lab.nodes["a"], lab.nodes["b"].intf("eth1").ip), "the link was added back, with its address"
        assert "rate 50Mbit" in lab.nodes["a"].cmd("tc class show dev eth1"), "and with its shaping"
        sleeper.kill()
        sleeper.wait()
    finally:
        lab.destroy()


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(") ", 1)[1][0]


def test_a_dead_trace_player_is_a_warning_an_inspect_state_and_a_fidelity_reason(topo_file, tmp_path):
    """A player that dies leaves a link that carries nothing: `inspect` says so (JSON and a printed warning),
    and a fidelity watch over that time fails with the reason."""
    import os
    import signal

    from nestlab.backends.services import traceplay
    from nestlab.lab.fidelity import Watch
    from nestlab.lab.lab import Lab

    _on_off(tmp_path / "onoff.trace")
    lab = Lab.from_file(topo_file(TRACED.replace("TRACE", "onoff.trace")))
    lab.deploy()
    shown = json.loads(run_cli("inspect", "--lab", lab.name, "--format", "json", check=True).stdout)
    (a,) = [n for n in shown["nodes"] if n["name"] == "a"]
    assert a["traces"]["eth1"]["player"] == "playing", a
    assert ping(lab.nodes["a"], "10.9.0.2"), "the traced link carries pings while its player runs"
    with Watch(lab) as watch:
        os.kill(traceplay.health(lab.name, "a", "eth1")["pid"], signal.SIGKILL)
        time.sleep(0.3)
    assert watch.verdict.level == "failed" and any("a:eth1 is dead" in r for r in watch.verdict.reasons), watch.verdict
    result = run_cli("inspect", "--lab", lab.name, "--format", "json", check=True)
    (a,) = [n for n in json.loads(result.stdout)["nodes"] if n["name"] == "a"]
    assert a["traces"]["eth1"]["player"] == "dead", a
    assert "warning: the trace player of a:eth1 is dead" in result.stderr, result.stderr
    assert not ping(lab.nodes["a"], "10.9.0.2"), "a dead player's link carries nothing"


def _set_trace(lab_name: str, *args: str) -> subprocess.CompletedProcess:
    return run_cli("link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--direction", "a", *args)


def _redirects(lab) -> int:
    return lab.nodes["a"].cmd(["tc", "filter", "show", "dev", "eth1", "parent", "1:"]).count("Redirect to device")


def test_live_trace_changes_replace_the_redirect_and_a_missing_one_is_seen(lab_from, lab_name, tmp_path):
    """Two live trace changes in a row: one redirect filter (to the new player's tap), pings pass, inspect
    says playing; a link whose redirect is gone is not `playing`."""
    from nestlab.backends.services import traceplay

    _trace(tmp_path / "t12.trace", [(1000, 12)])
    _trace(tmp_path / "fast.trace", [(100, 100)])
    lab = lab_from(TRACED.replace("TRACE", "t12.trace"))
    assert _redirects(lab) == 1
    for trace in ("fast.trace", "t12.trace"):
        done = _set_trace(lab_name, "--trace", str(tmp_path / trace))
        assert done.returncode == 0, done.stderr
        shown = lab.nodes["a"].cmd(["tc", "filter", "show", "dev", "eth1", "parent", "1:"])
        assert _redirects(lab) == 1, shown
        assert ping(lab.nodes["a"], "10.9.0.2", count=3), f"after --trace {trace}: {shown}"
        assert traceplay.health(lab_name, "a", "eth1")["player"] == "playing"
    lab.nodes["a"].cmd(["tc", "filter", "del", "dev", "eth1", "parent", "1:", "prio", "1"])
    health = traceplay.health(lab_name, "a", "eth1")
    assert health["player"] == "dead" and "redirects nothing" in health["why"], health


def test_a_trace_silence_is_not_a_lag(lab_from, lab_name, tmp_path):
    """200 ms of opportunities, then silent until 6 s: 4.5 s into the trace its player still says playing."""
    (tmp_path / "gap.trace").write_text("\n".join([str(ms) for ms in range(1, 201)] + ["6000"]) + "\n")
    lab_from(TRACED.replace("TRACE", "gap.trace"))
    from nestlab.backends.services import traceplay

    start = traceplay.health(lab_name, "a", "eth1")["start"]
    time.sleep(max(0.0, start + 4.5 - time.time()))
    shown = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json", check=True).stdout)
    (a,) = [n for n in shown["nodes"] if n["name"] == "a"]
    assert a["traces"]["eth1"]["player"] == "playing", a


def test_link_set_queue_on_a_traced_link_reaches_its_player(lab_from, lab_name, tmp_path):
    from nestlab.backends.services import traceplay

    _trace(tmp_path / "t12.trace", [(1000, 12)])
    lab = lab_from(TRACED.replace("TRACE", "t12.trace"))
    assert _set_trace(lab_name, "--queue", "5").returncode == 0
    (player,) = _players(lab_name, "a")
    args = player.split("\0")
    assert args[args.index("eth1") + 2] == "5", args  # IFACE TRACE QUEUE STATUS
    assert traceplay.health(lab_name, "a", "eth1")["queue"] == 5
    assert ping(lab.nodes["a"], "10.9.0.2", count=3)


def test_setting_the_same_trace_again_restarts_a_dead_player(lab_from, lab_name, tmp_path):
    import os
    import signal

    from nestlab.backends.services import traceplay

    _trace(tmp_path / "t12.trace", [(1000, 12)])
    lab = lab_from(TRACED.replace("TRACE", "t12.trace"))
    assert _set_trace(lab_name, "--trace", str(tmp_path / "t12.trace")).returncode == 0
    os.kill(traceplay.health(lab_name, "a", "eth1")["pid"], signal.SIGKILL)
    time.sleep(0.2)
    assert traceplay.health(lab_name, "a", "eth1")["player"] == "dead"
    assert not ping(lab.nodes["a"], "10.9.0.2")
    done = _set_trace(lab_name, "--trace", str(tmp_path / "t12.trace"))
    assert done.returncode == 0, done.stderr
    assert traceplay.health(lab_name, "a", "eth1")["player"] == "playing"
    assert ping(lab.nodes["a"], "10.9.0.2", count=3)
    assert len(_players(lab_name, "a")) == 1 and _redirects(lab) == 1


def test_a_trace_faster_than_a_player_can_follow_is_refused(topo_file, lab_from, lab_name, tmp_path):
    """A trace peaking above MAX_BPS over any 100 ms: a file error at deploy and at `link set`."""
    from nestlab.model import trace

    (tmp_path / "huge.trace").write_text("\n".join(["1"] * 20000 + ["10"]) + "\n")  # 24 Gbit/s
    _trace(tmp_path / "burst.trace", [(50, 10), (100, 600), (850, 1)])  # 600 Mbit/s for 100 ms across two slices
    burst = trace.read(str(tmp_path / "burst.trace"))
    slices = Counter(t // trace.BIN_MS for t in burst)  # fixed slices of BIN_MS would not see the burst
    assert max(slices.values()) * trace.PACKET_BYTES * 8 * 1000 // trace.BIN_MS < trace.MAX_BPS < trace.peak_bps(burst)
    refused = run_cli("deploy", "-t", str(topo_file(TRACED.replace("TRACE", "huge.trace"), "huge.yml")))
    assert refused.returncode == 2 and "huge.trace' is too fast: it peaks at 24,001 Mbit/s" in refused.stderr, refused.stderr
    lab_from(pair())
    for name in ("huge.trace", "burst.trace"):
        refused = _set_trace(lab_name, "--trace", str(tmp_path / name))
        assert refused.returncode == 2 and f"above the {trace.MAX_BPS // 10**6} Mbit/s" in refused.stderr, refused.stderr
    _trace(tmp_path / "ok.trace", [(1000, trace.MAX_BPS / 1e6 * 0.9)])
    assert _set_trace(lab_name, "--trace", str(tmp_path / "ok.trace")).returncode == 0
