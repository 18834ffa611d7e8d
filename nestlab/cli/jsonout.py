"""JSON on standard output, one way for the full commands and for the quick paths that load neither typer nor rich."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(data: Any) -> None:
    """JSON on standard output, written as is (rich's highlighting takes seconds for a large lab): indented
    for a terminal, one line for a pipe or file (the C encoder; ``| jq .`` indents it again)."""
    sys.stdout.write(json.dumps(data, indent=2 if sys.stdout.isatty() else None) + "\n")
