"""docs/security.md names a test for every promise and every input from someone less trusted: each named test
exists (a renamed or removed test leaves its row without proof)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?[^`]*`|`::(\w+)[^`]*`")


def _named(text: str) -> list[tuple[str, str | None]]:
    """(file, test) for every `tests/FILE.py::NAME`, and every `::NAME` after it (the same file), in the text."""
    found, current = [], None
    for file, test, more in NAMED.findall(text):
        current = file or current
        assert current, f"`::{more}` before any test file is named"
        found.append((current, test or more or None))
    return found


def _tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def test_every_test_docs_security_names_exists():
    named = _named((ROOT / "docs" / "security.md").read_text())
    assert len(named) > 40, named
    missing = []
    for file, test in named:
        path = ROOT / file
        if not path.exists():
            missing.append(file)
        elif test and test not in _tests(path):
            missing.append(f"{file}::{test}")
    assert not missing, f"docs/security.md names tests that do not exist: {missing}"


def test_every_input_of_the_inventory_names_its_test():
    text = (ROOT / "docs" / "security.md").read_text()
    inventory = text.split("## Every input from someone less trusted", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in inventory.splitlines() if line.startswith("| ") and not line.startswith("| input ")]
    assert len(rows) > 20, rows
    unproven = [row.split(" | ")[0] for row in rows if "`tests/" not in row.rsplit(" | ", 1)[-1]]
    assert not unproven, f"inventory rows without a test: {unproven}"
