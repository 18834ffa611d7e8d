"""nestlab graph: topology exports, and the live page checked in headless Chromium (Debian's chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from browser import Browser
from conftest import NESTLAB, ROOT, run_cli

STAR = (
    "name: {name}\ntopology:\n  nodes:\n    sw: {kind: bridge}\n"
    + "".join(f"    h{i}: {{}}\n" for i in range(1, 20))
    + "  links:\n"
    + "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(1, 20))
)
DOWN_COLOUR = "rgb(221,51,51)"


def test_exports_show_kinds_groups_modes_and_shaping(topo_file):
    path = topo_file((ROOT / "examples" / "twohosts.yml").read_text().replace("name: twohosts", "name: {name}"))
    mermaid = run_cli("graph", "-t", str(path), check=True).stdout
    assert mermaid.startswith("flowchart LR") and "subgraph" in mermaid and '"host server"' in mermaid
    assert "(vxlan)" in mermaid and "10gbit" in mermaid and "macvlan on nic0" in mermaid
    dot = run_cli("graph", "-t", str(path), "--format", "dot", check=True).stdout
    assert 'subgraph "cluster_host:client"' in dot and "shape=box3d" in dot
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tsvg"], input=dot, text=True, check=True, capture_output=True)
    drawio = ET.fromstring(run_cli("graph", "-t", str(path), "--format", "drawio", check=True).stdout)
    cells = drawio.findall(".//mxCell")
    assert sum(c.get("vertex") == "1" for c in cells) == 8 + 2  # 8 namespaces, 2 host clusters
    assert sum(c.get("edge") == "1" for c in cells) == 5
    elements = json.loads(run_cli("graph", "-t", str(path), "--format", "json", check=True).stdout)
    assert {e["data"]["mode"] for e in elements["edges"]} == {"veth", "vxlan", "macvlan", "bridge"}


def test_nested_nodes_are_groups():
    from nestlab import Lab
    from nestlab.observe import graph

    els = graph.elements(Lab.from_file(ROOT / "examples" / "nestednet-manet.yml").plan)
    parents = {n["data"]["id"]: n["data"]["parent"] for n in els["nodes"]}
    assert parents["drone1/gnab"] == parents["drone1"] == "group:drone1"
    assert len([n for n in els["nodes"] if n["data"]["kind"] == "group"]) == 12


@pytest.mark.throughput
def test_live_page_shows_every_node_and_follows_a_link_set_down(lab_from, tmp_path):
    lab = lab_from(STAR)
    server = subprocess.Popen(
        [*NESTLAB, "graph", "--lab", lab.name, "--serve", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        assert "live view of lab" in line, line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:"), "loopback only by default"
        with Browser(url) as page:
            page.wait_for("window.cy && cy.nodes().length > 0 && document.getElementById('status').dataset.updated")
            shown = page.eval("cy.nodes().map(n => n.id())")
            assert set(shown) == {"sw", *(f"h{i}" for i in range(1, 20))}
            assert page.eval("document.querySelectorAll('#nodelist li').length") == 20
            edge = "h1:eth1=sw:p1"
            assert page.eval(f"cy.getElementById('{edge}').style('line-color')") != DOWN_COLOUR
            # A link set down from the CLI turns to the down colour within 2 s.
            run_cli("link", "set", "--lab", lab.name, "h1:eth1", "sw:p1", "--down", check=True)
            _, waited = page.wait_for(f"cy.getElementById('{edge}').style('line-color') === '{DOWN_COLOUR}'", timeout=10)
            assert waited <= 2.0, f"the page showed the link down after {waited:.2f} s"
            # Clicking a node shows its interfaces and addresses.
            page.eval("cy.getElementById('h2').emit('tap'), true")
            details, _ = page.wait_for(
                "document.getElementById('details').innerText.includes('eth1') && document.getElementById('details').innerText"
            )
            assert lab.nodes["h2"].intf("eth1").ipv4[0] in details
            # The page sets the link up again, through the same code path as `nestlab link set`.
            page.eval(f"setLink(cy.getElementById('{edge}'), 'up').then(() => true)")
            page.wait_for(f"cy.getElementById('{edge}').style('line-color') !== '{DOWN_COLOUR}'", timeout=10)
            assert "state UP" in lab.nodes["h1"].cmd("ip link show eth1")
            shown = json.loads(
                run_cli("link", "show", "--lab", lab.name, "h1:eth1", "sw:p1", "--format", "json", check=True).stdout
            )
            assert shown[0]["state"] == "up"
            page.screenshot(str(tmp_path / "graph.png"))
            assert (tmp_path / "graph.png").stat().st_size > 10_000
    finally:
        server.terminate()
        server.wait(timeout=30)
