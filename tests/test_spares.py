"""Namespaces and cables made ahead by a helper process while a deploy loads (backends/spares.py), and
the glance at a topology file that says what to make."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import ROOT, processes, run_cli, star

from nestlab import names
from nestlab.backends.kernel import rtdump, spares
from nestlab.backends.kernel.netlink import Netlink
from nestlab.engine.deploy import wanted_of
from nestlab.model.glance import Glance, glance


def _links(spare: spares.Spare) -> dict[str, rtdump.LinkInfo]:
    """Every interface the spare's own netlink socket sees, by name."""
    return {info.name: info for info in rtdump.interfaces(Netlink(sock=spare.sock), counters=False)}


def _close(got: list[spares.Spare]) -> None:
    for spare in got:
        os.close(spare.net)
        os.close(spare.uts)
        spare.sock.close()


def test_spares_are_separate_namespaces_with_their_loopback_up():
    spares.start(lambda: spares.Wanted("nestlab:t", ["a", "b"], extra=1))
    try:
        got = [spares.take("b"), spares.take("a"), spares.take("a component")]
        assert spares.take("c") is None  # nothing was made for it
        assert spares.wired() == []
    finally:
        spares.stop()
    try:
        inodes = {os.fstat(s.net).st_ino for s in got}
        assert len(inodes) == 3 and os.stat("/proc/self/ns/net").st_ino not in inodes
        assert len({os.fstat(s.uts).st_ino for s in got}) == 3
        for spare in got:
            links = _links(spare)
            assert list(links) == ["lo"]  # a loopback and nothing else: the socket is inside the spare
            assert links["lo"].admin_up
    finally:
        _close(got)


def test_the_helper_wires_cables_between_spares():
    ahead = spares.Wanted(
        "nestlab:t", ["h1", "sw", "h2"], bridges=["sw"], cables=[("h1", "eth1", "sw", "p1"), ("sw", "p2", "h2", "eth1")]
    )
    spares.start(lambda: ahead)
    try:
        got = {name: spares.take(name) for name in ("sw", "h1", "h2")}
        time.sleep(2)  # milliseconds of work: wired() tells the helper to stop, and it should have nothing left
        made = spares.wired()
    finally:
        spares.stop()
    try:
        # Both from the bridge's side, enslaved at birth, and reported as in place (both ends taken).
        assert sorted(made) == [
            (spares.Cable("sw", "p1", "h1", "eth1", True), True, True),
            (spares.Cable("sw", "p2", "h2", "eth1", True), True, True),
        ]
        bridge = _links(got["sw"])
        assert bridge["p1"].master == bridge["sw"].index and bridge["p2"].master == bridge["sw"].index
        assert bridge["sw"].admin_up
        assert set(_links(got["h1"])) == {"lo", "eth1"} and set(_links(got["h2"])) == {"lo", "eth1"}
    finally:
        _close(list(got.values()))


def test_a_helper_with_nothing_to_make_says_so():
    spares.start(lambda: spares.Wanted("", ()))
    try:
        assert not spares.coming()  # the applier then makes namespaces itself, in parallel
        assert spares.take("a") is None and spares.wired() == []
    finally:
        spares.stop()


def test_stop_ends_the_helper_before_it_is_done():
    spares.start(lambda: spares.Wanted("nestlab:t", [f"n{i}" for i in range(100_000)]))
    helper = spares._helper.pid
    assert spares.take("n0") is not None
    spares.stop()
    assert not os.path.exists(f"/proc/{helper}")  # killed and reaped
    assert spares.take("n1") is None


def test_the_helper_dies_with_its_parent():
    code = (
        "import time; from nestlab.backends.kernel import spares; "
        "spares.start(lambda: time.sleep(120)); print('started', flush=True); time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert parent.stdout.readline().strip() == "started"
        with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as fh:
            (helper,) = (int(pid) for pid in fh.read().split())
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{helper}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{helper}")


def test_a_refused_file_leaves_no_helper(tmp_path):
    path = tmp_path / "refused.yml"
    path.write_text(star("sparesrefused", 30).replace("sw: {kind: bridge}", "sw: {kind: bridge, colour: red}"))
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stderr
    assert "colour" in result.stderr
    assert not [cmd for _, cmd in processes() if str(path) in cmd]


def test_cables_the_plan_does_not_want_are_remade(topo_file, lab_name):
    """The glance takes b1 and b2 for hosts (their kind comes from ``defaults``), so the helper makes
    h1's cable from h1's side and b1-b2 without a bridge; the plan wants both from bridge sides,
    enslaved: the first is removed and made again, the second (same orientation, not enslaved) too."""
    text = (
        f"name: {lab_name}\ntopology:\n  defaults: {{kind: bridge}}\n  nodes:\n    b1: {{}}\n    b2: {{}}\n"
        "    h1: {kind: linux}\n    h2: {kind: linux}\n  links:\n"
        '    - endpoints: ["h1:eth1", "b1:p1"]\n    - endpoints: ["b1:up", "b2:up"]\n    - endpoints: ["h2:eth1", "b2:p2"]\n'
    )
    path = topo_file(text)
    seen = glance(path)
    assert seen.bridges == [] and len(seen.cables) == 3
    run_cli("deploy", "-t", str(path), check=True)
    try:
        for bridge, ports in (("b1", {"p1", "up"}), ("b2", {"p2", "up"})):
            shown = subprocess.run(
                ["ip", "-n", names.netns_name(lab_name, bridge), "-o", "link", "show", "master", bridge],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert {line.split(": ")[1].split("@")[0] for line in shown.splitlines()} == ports
        for host in ("h1", "h2"):
            shown = subprocess.run(
                ["ip", "-n", names.netns_name(lab_name, host), "-o", "link"], capture_output=True, text=True, check=True
            ).stdout
            assert len(shown.splitlines()) == 2  # lo and eth1: nothing the helper made is left over
        address = (
            run_cli("exec", "--lab", lab_name, "h2", "--", "ip", "-4", "-o", "addr", "show", "eth1")
            .stdout.split()[3]
            .split("/")[0]
        )
        ping = run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W2", address)
        assert ping.returncode == 0, ping.stdout + ping.stderr
    finally:
        run_cli("destroy", "--lab", lab_name, check=True)


def test_glance_says_what_to_makeahead_of(tmp_path):
    def looked(text: str) -> Glance:
        path = tmp_path / "lab.yml"
        path.write_text(text)
        return glance(path)

    seen = looked(star("g", 2))
    assert (seen.name, seen.nodes, seen.bridges, seen.extra) == ("g", ["sw", "h0", "h1"], ["sw"], 0)
    assert seen.cables == [("h0", "eth1", "sw", "p0"), ("h1", "eth1", "sw", "p1")]
    seen = looked(star("g", 2, "    d: {image: alpine}\n    r: {runtime: runc}\n    f: {kind: frr}\n"))
    assert seen.nodes == ["sw", "h0", "h1", "f"] and len(seen.cables) == 2
    seen = looked(star("g", 1, "    n:\n      components: {c1: {}, c2: {}}\n"))
    assert (seen.nodes, seen.extra) == (["sw", "h0", "n"], 2)
    assert looked(star("g", 1, "    n:\n      nesting: flat\n      components: {c1: {}}\n")).extra == 0
    assert looked(star("g", 1).replace("sw: {kind: bridge}", "sw: {kind: bridge, sysctls: {a.b: 1}}")).bridges == []
    assert looked(star("g", 3) + "servers: {a: {}, b: {}}\n") == Glance("g")
    assert looked(star("g", 3).replace("topology:\n", "topology:\n  defaults: {image: alpine}\n")) == Glance("g")
    assert looked("name: [unclosed\n") == Glance()
    assert glance(tmp_path) == Glance()  # a folder: a Kathará lab
    reader, writer = os.pipe()  # what a server's nestlab deploys: -t /dev/stdin, read once, by the deploy
    os.write(writer, star("g", 1).encode())
    os.close(writer)
    try:
        assert glance(f"/proc/self/fd/{reader}") == Glance()
        assert os.read(reader, 100).startswith(b"name: g")
    finally:
        os.close(reader)
    assert glance(tmp_path / "missing.yml") == Glance()


def test_a_running_lab_gets_nothingahead_of(lab_from):
    lab = lab_from(star("{name}", 1))
    seen = Glance(lab.name, ["sw", "h0"], 0, ["sw"], [("h0", "eth1", "sw", "p0")])
    assert wanted_of(seen, reconfigure=False) == spares.Wanted("", ())  # a reconcile makes few, if any
    assert wanted_of(seen, reconfigure=True).nodes == ["sw", "h0"]  # destroyed first, then made anew
    assert wanted_of(Glance(), reconfigure=True) == spares.Wanted("", ())
