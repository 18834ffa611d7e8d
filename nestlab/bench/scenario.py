"""The scenario engine: a suite is a topology template, a parameter matrix, repetitions and a duration.

Cells that share a topology (``Suite.lab_key``) share one deployed lab; every repetition of
every cell is measured by ``Suite.measure``, which returns rows (one per pair, plus the
aggregate as pair ``"all"``).  A measurement whose tool fails becomes an ``error`` row and
the run goes on (iperf3's control connection can starve under many UDP pairs, as seed 002 saw).  Results are written as they are: Ctrl-C stops after the
current measurement, keeps every finished cell, destroys the lab and still writes the report.
"""

from __future__ import annotations

import errno
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LabError
from ..lab.fidelity import Verdict, Watch
from ..lab.lab import Lab
from . import report, results, stats
from .suite import Axes, Cell, Key, Recorder, Row, Suite


def cells(axes: Axes) -> list[Cell]:
    """Every cell of the matrix (the product of its axes), or of each matrix in a list."""
    if isinstance(axes, list):
        return [cell for matrix in axes for cell in cells(matrix)]
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))]


def _key(cell: Cell) -> Key:
    return tuple(sorted((k, str(v)) for k, v in cell.items()))


def summary(cell: Cell, rows: list[Row], verdicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One cell's figures' mean and 95 % interval over its repetitions (the aggregate rows, ``pair: all``) and its
    fidelity (the worst repetition's, every reason, each repetition's figures); None while nothing was measured."""
    mine = [r for r in rows if not r.get("error")]
    if not mine:
        return None
    values: dict[str, list[float]] = {}
    for row in [r for r in mine if r.get("pair") == "all"] or mine:
        for k, v in row.items():
            if k not in cell and k != "rep" and isinstance(v, int | float) and not isinstance(v, bool):
                values.setdefault(k, []).append(float(v))
    figures = {}
    for k, vs in values.items():
        s = stats.summarize(vs)
        figures[k] = {"mean": s["mean"], "ci95": [s["ci95_low"], s["ci95_high"]], "n": s["n"]}
    return {"cell": cell, "figures": figures, "fidelity": {**Verdict.worst(verdicts), "measurements": verdicts}}


@dataclass
class _Run:
    """A run's results so far: every row and, per cell (in the matrix's order), its rows, each repetition's
    fidelity verdict and its summary (remade when the cell gains a measurement: the cell alone, not the whole
    run, is summed again)."""

    suite: Suite
    out: Path
    meta: dict[str, Any]
    order: list[Key]
    recorder: Recorder
    duration: float
    rows: list[Row] = field(default_factory=list)
    cell_rows: dict[Key, list[Row]] = field(default_factory=dict)
    verdicts: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)
    summaries: dict[Key, dict[str, Any]] = field(default_factory=dict)
    done: int = 0

    def group(self, group: list[Cell], reps: int, progress: Callable[[str, int, int], None] | None, total: int) -> None:
        """The cells that share a lab: deployed once, each cell measured ``reps`` times, destroyed."""
        lab = self.suite.build(group[0])
        try:
            lab.deploy()
            for rep in range(reps):
                for cell in group:
                    self.measure(lab, cell, rep)
                    if progress:
                        progress(", ".join(f"{k}={v}" for k, v in cell.items()), self.done, total)
        finally:
            lab.destroy()

    def measure(self, running: Lab, cell: Cell, rep: int) -> None:
        """One repetition of one cell, with its fidelity verdict (an error row if a tool failed), written at once."""
        key, columns = _key(cell), {}
        try:
            with Watch(running) as watch:
                measured = self.suite.measure(running, cell, self.duration, self.recorder)
        except (LabError, ValueError) as exc:  # a tool failed in this cell: record it, go on
            measured = [{"pair": "all", "error": str(exc)[:300]}]
        else:
            self.verdicts.setdefault(key, []).append({"rep": rep, **watch.verdict.to_json()})
            columns = {"fidelity": watch.verdict.level, "fidelity_reasons": "; ".join(watch.verdict.reasons)}
        new = [{**cell, "rep": rep, **row, **columns} for row in measured]
        self.rows += new
        self.cell_rows.setdefault(key, []).extend(new)
        if (made := summary(cell, self.cell_rows[key], self.verdicts.get(key, []))) is not None:
            self.summaries[key] = made
        self.done += 1
        self.write()  # kept at once

    def write(self) -> None:
        results.write(self.out, self.meta, self.rows, [self.summaries[k] for k in self.order if k in self.summaries])


def run(
    suite: Suite,
    out: Path,
    *,
    quick: bool = False,
    reps: int | None = None,
    duration: float | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Run the suite into ``out`` (a new folder); returns it.  Writes results.json/csv, raw/ and report.html."""
    out.mkdir(parents=True, exist_ok=False)
    reps = reps or (suite.quick_reps if quick else suite.reps)
    duration = duration or (suite.quick_duration if quick else suite.duration)
    todo = cells(suite.quick_axes if quick else suite.axes)
    skipped = [(cell, why) for cell in todo if (why := suite.unavailable(cell))]
    todo = [cell for cell in todo if not suite.unavailable(cell)]
    recorder = Recorder(out)
    meta = _meta(suite, quick, reps, duration, len(todo), skipped)
    state = _Run(suite, out, meta, [_key(cell) for cell in todo], recorder, duration)
    total = len(todo) * reps
    groups: dict[Key, list[Cell]] = {}
    for cell in todo:
        groups.setdefault(suite.lab_key(cell), []).append(cell)
    try:
        for group in groups.values():
            state.group(group, reps, progress, total)
        meta["interrupted"] = False
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise LabError(
            f"the disk holding {out} is full: stopped after {state.done} of {total} measurements; "
            f"results.json keeps those finished before it filled"
        ) from None
    finally:
        meta["finished"] = time.time()
        meta["commands"] = sorted(set(recorder.commands))
        try:
            state.write()
            report.render(out, suite)
        except OSError as exc:
            if exc.errno != errno.ENOSPC or not meta["interrupted"]:
                raise
    return out


def _meta(suite: Suite, quick: bool, reps: int, duration: float, count: int, skipped: list[tuple[Cell, str]]) -> dict[str, Any]:
    """The run's description for results.json: this machine, the suite, its settings, the cells skipped."""
    return results.machine() | {
        "suite": suite.name,
        "title": suite.title,
        "paper": suite.paper,
        "quick": quick,
        "reps": reps,
        "duration_s": duration,
        "cells": count,
        "skipped": [{"cell": c, "why": w} for c, w in skipped],
        "started": time.time(),
        "interrupted": True,  # until every cell is done: what is written part-way says so
    }
