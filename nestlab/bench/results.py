"""A results folder: ``results.json`` (machine, suite, every row), ``results.csv`` (the rows), ``raw/`` logs."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import LabError


def machine() -> dict[str, Any]:
    """What a reader needs to judge the numbers: kernel, CPU, nestlab and tool versions."""
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor()
    )
    tools = {}
    for tool, flag in (("iperf3", "--version"), ("sockperf", "--version"), ("ping", "-V")):
        if shutil.which(tool):
            result = subprocess.run([tool, flag], capture_output=True, text=True)
            tools[tool] = (
                (result.stdout or result.stderr).strip().splitlines()[0] if (result.stdout or result.stderr).strip() else "?"
            )
    try:
        version = metadata.version("nestlab")
    except metadata.PackageNotFoundError:
        version = "source"
    return {
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "nestlab": version,
        "python": platform.python_version(),
        "tools": tools,
    }


def write(folder: Path, meta: dict[str, Any], rows: list[dict[str, Any]], cells: list[dict[str, Any]] | None = None) -> None:
    """results.json (``meta``, ``rows``, and ``cells``: each cell's summary and fidelity) and results.csv
    (the rows), each replaced whole or not at all (a full disk keeps the last)."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    for name, content in (
        ("results.json", json.dumps({"meta": meta, "cells": cells or [], "rows": rows}, indent=1)),
        ("results.csv", text.getvalue()),
    ):
        tmp = folder / f".{name}.tmp"
        try:
            tmp.write_text(content)
            tmp.replace(folder / name)
        finally:
            tmp.unlink(missing_ok=True)


def load(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = Path(folder) / "results.json"
    if not path.exists():
        raise LabError(f"{folder} is not a results folder (no results.json); `nestlab bench SUITE` makes one")
    data = json.loads(path.read_text())
    return data["meta"], data["rows"]


def cells(folder: Path) -> list[dict[str, Any]]:
    """The per-cell summaries (figures, fidelity) of a results folder; none in one written before they were."""
    cells: list[dict[str, Any]] = json.loads((Path(folder) / "results.json").read_text()).get("cells", [])
    return cells
