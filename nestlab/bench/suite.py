"""What a benchmark suite is: a topology template, a parameter matrix, repetitions, a duration,
how to measure a cell and which figures to draw (the scenario engine runs it, the report draws it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..lab.lab import Lab

Cell = dict[str, Any]  # one point of a parameter matrix: its values are words and numbers
Key = tuple[Any, ...]  # a cell's values in a figure's order (x value, series value)
Row = dict[str, object]
Axes = dict[str, list[Any]] | list[dict[str, list[Any]]]  # one parameter matrix, or several (their cells, in order)


@dataclass
class Figure:
    """One chart of the report, laid out like the paper's: ``metric`` per ``x`` value, a bar per ``series`` value.

    ``line``: a line per series over a numeric ``x`` instead (a time series, a scaling curve).
    """

    id: str
    title: str
    metric: str
    unit: str
    x: str
    series: str
    where: dict[str, object]
    paper: dict[Key, float] = field(default_factory=dict)  # (x value, series value) -> the paper's number
    paper_ref: str = ""
    paper_unit: str = ""
    higher_is_better: bool = True
    aggregate: bool = False  # the value is the cell's ``pair: "all"`` row (a total), not the mean over pairs
    claim: str = ""  # the paper's finding in words, when it gives no numbers
    claim_rank: list[Any] | None = None  # that finding as x values best first (None: no ranking claimed)
    line: bool = False


@dataclass
class Suite:
    name: str
    title: str
    paper: str
    axes: Axes
    quick_axes: Axes
    reps: int
    quick_reps: int
    duration: float
    quick_duration: float
    build: Callable[[Cell], Lab]
    lab_key: Callable[[Cell], Key]
    measure: Callable[[Lab, Cell, float, Recorder], list[Row]]
    figures: list[Figure]
    unavailable: Callable[[Cell], str | None] = lambda cell: None
    notes: list[str] = field(default_factory=list)


class Recorder:
    """Collects the exact commands and raw output of every measurement, for the results folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.commands: list[str] = []
        self.count = 0

    def raw(self, label: str, command: list[str], output: str) -> None:
        self.count += 1
        self.commands.append(" ".join(command))
        (self.folder / "raw").mkdir(parents=True, exist_ok=True)
        (self.folder / "raw" / f"{self.count:05d}-{label}.log").write_text(" ".join(command) + "\n\n" + output)
