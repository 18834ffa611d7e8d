"""Namespaces made ahead by a helper process while a deploy plans the lab (backends/spares.py), and the glance
at a topology's data that says what to make."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import yaml
from conftest import ROOT, processes, run_cli, star

from nestlab.backends.kernel import rtdump, spares
from nestlab.backends.kernel.netlink import Netlink
from nestlab.engine.deploy import wanted_of
from nestlab.model import glance
from nestlab.model.glance import Glance


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


def test_a_bridge_node_gets_its_bridge_ahead():
    spares.start(lambda: spares.Wanted("nestlab:t", ["h1", "sw"], bridges=["sw"]))
    try:
        got = {name: spares.take(name) for name in ("sw", "h1")}
    finally:
        spares.stop()
    try:
        bridge = _links(got["sw"])
        assert set(bridge) == {"lo", "sw"} and bridge["sw"].kind == "bridge"
        assert set(_links(got["h1"])) == {"lo"}
    finally:
        _close(list(got.values()))


def test_a_helper_with_nothing_to_make_says_so():
    spares.start(lambda: spares.Wanted("", ()))
    try:
        assert not spares.coming()  # the applier then makes namespaces itself, in parallel
        assert spares.take("a") is None
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


def test_glance_says_what_to_make_ahead_of():
    def looked(text: str) -> Glance:
        return glance.looked(yaml.safe_load(text))

    seen = looked(star("g", 2))
    assert (seen.name, seen.nodes, seen.bridges, seen.extra) == ("g", ["sw", "h0", "h1"], ["sw"], 0)
    seen = looked(star("g", 2, "    d: {image: alpine}\n    r: {runtime: runc}\n    f: {kind: frr}\n"))
    assert seen.nodes == ["sw", "h0", "h1", "f"]
    seen = looked(star("g", 1, "    n:\n      components: {c1: {}, c2: {}}\n"))
    assert (seen.nodes, seen.extra) == (["sw", "h0", "n"], 2)
    assert looked(star("g", 1, "    n:\n      nesting: flat\n      components: {c1: {}}\n")).extra == 0
    assert looked(star("g", 1).replace("sw: {kind: bridge}", "sw: {kind: bridge, sysctls: {a.b: 1}}")).bridges == []
    assert looked(star("g", 3) + "servers: {a: {}, b: {}}\n") == Glance("g")
    assert looked(star("g", 3).replace("topology:\n", "topology:\n  defaults: {image: alpine}\n")) == Glance("g")
    assert looked("name: [unclosed]\n") == Glance()


def test_a_running_lab_gets_nothing_ahead_of(lab_from):
    lab = lab_from(star("{name}", 1))
    seen = Glance(lab.name, ["sw", "h0"], 0, ["sw"])
    assert wanted_of(seen) == spares.Wanted("", ())  # a reconcile makes few, if any
    assert wanted_of(Glance("new", ["sw", "h0"], 0, ["sw"])).nodes == ["sw", "h0"]
    assert wanted_of(Glance()) == spares.Wanted("", ())
