"""Statistics per benchmark cell: centre, spread, a 95 % confidence interval, and ratios between cells.

The interval uses Student's t (the repetitions are few); a cell whose coefficient of
variation exceeds 10 % is flagged noisy, with a suggestion for more repetitions.
A ratio of two cells' means gets a 95 % interval by the delta method.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

NOISY_CV_PCT = 10.0
# Two-sided 95 % critical values of Student's t for 1..30 degrees of freedom; 1.96 beyond.
_T95 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def summarize(values: list[float]) -> dict[str, Any]:
    """n, mean, median, stdev, sem, ci95 (low, high), cv_pct and ``noisy`` for one cell's repetitions."""
    n = len(values)
    if n == 0:
        raise ValueError("no values to summarize")
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n > 1 else 0.0
    sem = stdev / math.sqrt(n) if n > 1 else 0.0
    half = t95(n - 1) * sem if n > 1 else 0.0
    cv = 100.0 * stdev / abs(mean) if mean else 0.0
    return {
        "n": n,
        "mean": mean,
        "median": statistics.median(values),
        "stdev": stdev,
        "sem": sem,
        "ci95_low": mean - half,
        "ci95_high": mean + half,
        "cv_pct": cv,
        "noisy": n > 1 and cv > NOISY_CV_PCT,
    }


def ratio(numerator: list[float], denominator: list[float]) -> dict[str, Any]:
    """mean(numerator) / mean(denominator) with a 95 % interval (delta method, independent samples)."""
    a, b = summarize(numerator), summarize(denominator)
    if b["mean"] == 0:
        raise ValueError("ratio to a cell whose mean is 0")
    r = a["mean"] / b["mean"]
    rel = math.sqrt((a["sem"] / a["mean"]) ** 2 + (b["sem"] / b["mean"]) ** 2) if a["mean"] else 0.0
    df = max(1, min(a["n"], b["n"]) - 1)
    half = t95(df) * abs(r) * rel
    return {"ratio": r, "ci95_low": r - half, "ci95_high": r + half}


def advice(summary: dict[str, Any]) -> str:
    """What to do about a noisy cell."""
    if not summary["noisy"]:
        return ""
    # Repetitions that would bring the interval's half-width to 5 % of the mean at this spread.
    need = math.ceil((1.96 * summary["cv_pct"] / 5.0) ** 2)
    return f"CV {summary['cv_pct']:.0f} % > {NOISY_CV_PCT:.0f} %: rerun with --reps {max(need, summary['n'] + 1)} (or on a quieter machine)"
