"""The layout keeps its promises (docs/architecture.md): one-way layers, no import circles, and the
registries of link modes and runtimes are what the schema, the docs and the CLI offer."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

from conftest import ROOT, run_cli

from nestlab import links, runtimes
from nestlab.model.schema import LinkSpec, NodeSpec

PACKAGE = ROOT / "nestlab"
CYCLES = ROOT.parent / "shared" / "tools" / "import_cycles.py"  # beside every checkout, CI's included


def _imports(path: Path) -> set[str]:
    """The nestlab modules a file imports (relative imports resolved), wherever in the file."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.startswith("nestlab")}


def test_no_import_circles():
    assert CYCLES.exists(), f"{CYCLES} is missing (the shared tools sit beside the checkout)"
    result = subprocess.run([sys.executable, str(CYCLES), str(PACKAGE)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout


def test_lower_layers_never_import_upper_ones():
    upper = ("nestlab.lab", "nestlab.cli", "nestlab.bench")
    for folder in ("backends", "links", "runtimes", "plan", "model"):
        for path in (PACKAGE / folder).rglob("*.py"):
            bad = sorted(m for m in _imports(path) if m.startswith(upper))
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


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
