"""Topology errors that point at the file, line and column to fix."""

from __future__ import annotations

from dataclasses import dataclass

Path = tuple[str | int, ...]


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a topology, and where."""

    path: Path
    message: str
    line: int | None = None
    column: int | None = None

    def render(self, source: str) -> str:
        where = source
        if self.line is not None:
            where += f":{self.line}:{self.column}"
        return f"{where}: {dotted(self.path)}: {self.message}"


class TopologyError(ValueError):
    """A topology that cannot be deployed; ``str()`` lists every problem with its location."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))
