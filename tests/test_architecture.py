"""The layout keeps its promises (docs/architecture.md): one-way layers, no import circles, and the
registries of link modes and runtimes are what the schema, the docs and the CLI offer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

from conftest import ROOT, run_cli

from nestlab import links, runtimes
from nestlab.model.schema import LinkSpec, NodeSpec

PACKAGE = ROOT / "nestlab"


def test_the_layer_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts (the layers of docs/architecture.md), checked by import-linter."""
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_no_import_circles():
    """No module of nestlab reaches itself through its imports (any import, at the top or in a function), by grimp's graph."""
    import grimp

    graph = grimp.build_graph("nestlab", cache_dir=None)
    circles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(module + ".") or module.startswith(imported + "."):
                continue  # a package and its own modules
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                circles.add(" -> ".join((module, *chain)))
    assert not circles, "\n".join(sorted(circles))


def test_the_schema_offers_what_the_registries_hold():
    assert set(get_args(get_args(LinkSpec.model_fields["mode"].annotation)[0])) == set(links.names())
    assert set(get_args(get_args(NodeSpec.model_fields["runtime"].annotation)[0])) == set(runtimes.selectable())
    for key in links.option_owners():
        assert key in LinkSpec.model_fields, key


def test_every_mode_and_runtime_is_documented_and_listed():
    modes_doc = (ROOT / "docs" / "modes.md").read_text()
    for name in links.names():
        assert f"| `{name}`" in modes_doc, f"docs/modes.md has no row for mode {name}"
        assert links.get(name).summary, name
    listing = json.loads(run_cli("modes", "--format", "json", check=True).stdout)
    assert [m["mode"] for m in listing["modes"]] == links.names()
    assert {r["runtime"] for r in listing["runtimes"]} == set(runtimes.REGISTRY)
    nesting = (ROOT / "docs" / "nesting.md").read_text() + (ROOT / "docs" / "architecture.md").read_text()
    for name in runtimes.REGISTRY:
        assert f"`{name}`" in nesting, f"runtime {name} is not documented"
