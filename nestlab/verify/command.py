"""``command:``: a shell command run in a node exits as expected and prints what ``output`` matches."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..model.checks import Command
from .probing import Probe, run_in

if TYPE_CHECKING:
    from ..lab.lab import Lab


def probe(running: Lab, s: Command) -> Probe:
    pattern = re.compile(s.output, re.MULTILINE) if s.output is not None else None

    def command() -> tuple[bool, str]:
        rc, out = run_in(running, s.node, ["sh", "-c", s.run])
        ok = (s.exit is None or rc == s.exit) and (pattern is None or bool(pattern.search(out)))
        return ok, f"exit {rc}: {out.strip()[-200:] or '(no output)'}"

    return command
