"""``report.html`` from a results folder, and ``compare`` of two folders.

The report is one self-contained file.  It has the machine and suite, then per paper figure:
a bar chart (inline SVG from matplotlib) with 95 % intervals, our table (mean, CI, CV, noisy
flag with advice), the paper's numbers and a line saying whether the ranking agrees and by
how much the extremes differ.
"""

from __future__ import annotations

import html
import io
import statistics
from pathlib import Path
from typing import Any

from ..lab.fidelity import LEVELS
from . import results, stats
from .suite import Figure, Key, Suite


def per_rep(rows: list[dict[str, Any]], fig: Figure) -> dict[Key, list[float]]:
    """(x, series) -> one value per repetition: the metric averaged over the pairs of that repetition."""
    buckets: dict[Key, dict[int, list[float]]] = {}
    for row in rows:
        if (row.get("pair") == "all") != fig.aggregate or row.get(fig.metric) is None:
            continue
        if any(row.get(k) != v for k, v in fig.where.items()):
            continue
        key = (row[fig.x], row[fig.series])
        buckets.setdefault(key, {}).setdefault(row["rep"], []).append(float(row[fig.metric]))
    return {key: [statistics.fmean(v) for _, v in sorted(reps.items())] for key, reps in buckets.items()}


def fidelity(rows: list[dict[str, Any]], fig: Figure) -> dict[Key, str]:
    """(x, series) -> the worst fidelity verdict of the measurements behind that bar."""
    worst: dict[Key, str] = {}
    for row in rows:
        if row.get("fidelity") is None or any(row.get(k) != v for k, v in fig.where.items()) or fig.x not in row:
            continue
        key = (row[fig.x], row[fig.series])
        worst[key] = max(worst.get(key, "ok"), row["fidelity"], key=LEVELS.index)
    return worst


def _fidelity_section(cells: list[dict[str, Any]]) -> str:
    """Which cells the emulation may not have kept up in, and why (docs/fidelity.md)."""
    judged = [c for c in cells if c["fidelity"]["measurements"]]
    bad = [c for c in judged if c["fidelity"]["verdict"] != "ok"]
    head = f"<h2 id='fidelity'>Fidelity</h2><p>{len(judged) - len(bad)} of {len(judged)} cells ok"
    if not bad:
        return head + ": the emulation kept up with every measurement.</p>"
    table = [
        [", ".join(f"{k}={v}" for k, v in c["cell"].items()), c["fidelity"]["verdict"], "; ".join(c["fidelity"]["reasons"])]
        for c in bad
    ]
    return (
        head
        + "; these are not, and their numbers describe the machine as much as the network:</p>"
        + _table(["cell", "verdict", "why"], table, "fidelity")
    )


def _verdict(paper_order: list[Any], our_order: list[Any], ours: dict[Key, dict[str, Any]]) -> str:
    """ "agrees", or "undecided" when every pair we order differently overlaps in its 95 % intervals, else "differs"."""
    if paper_order == our_order:
        return "agrees"
    ours_rank = {x: i for i, x in enumerate(our_order)}
    swapped = [(a, b) for i, a in enumerate(paper_order) for b in paper_order[i + 1 :] if ours_rank[a] > ours_rank[b]]
    overlap = all(ours[a]["ci95_high"] >= ours[b]["ci95_low"] and ours[b]["ci95_high"] >= ours[a]["ci95_low"] for a, b in swapped)
    return "undecided, within our 95 % intervals" if overlap else "differs"


def claim_agreement(fig: Figure, ours: dict[Key, dict[str, Any]]) -> list[str]:
    """Per series: our ranking against the ranking the paper states in words (or our spread, if it claims none)."""
    lines = []
    for series in sorted({s for _, s in ours}, key=str):
        measured = {x: v["mean"] for (x, s), v in ours.items() if s == series}
        our_order = sorted(measured, key=lambda x: measured[x], reverse=fig.higher_is_better)
        if fig.claim_rank is None:
            spread = max(measured.values()) / min(measured.values()) if min(measured.values()) > 0 else float("inf")
            lines.append(
                f"{fig.series}={series}: paper claims no ranking; ours best first: {', '.join(map(str, our_order))} (best/worst {spread:.2f})"
            )
            continue
        claimed = [x for x in fig.claim_rank if x in measured]
        if len(claimed) < 2:
            lines.append(f"{fig.series}={series}: too few of the paper's modes measured here to compare")
            continue
        ours_claimed = [x for x in our_order if x in claimed]
        verdict = _verdict(claimed, ours_claimed, {x: ours[(x, series)] for x in claimed})
        lines.append(
            f"{fig.series}={series}: ranking {verdict} (best first - paper: {', '.join(map(str, claimed))}; ours: {', '.join(map(str, ours_claimed))})"
        )
    return lines


def agreement(fig: Figure, ours: dict[Key, dict[str, Any]]) -> list[str]:
    """Per series: does our ranking of the x values match the paper's, and how far apart are the extremes."""
    if fig.claim:
        return claim_agreement(fig, ours)
    lines = []
    for series in sorted({s for _, s in fig.paper} & {s for _, s in ours}, key=str):
        xs = [x for (x, s) in fig.paper if s == series and (x, series) in ours]
        if len(xs) < 2:
            continue
        paper_order = sorted(xs, key=lambda x: fig.paper[(x, series)], reverse=fig.higher_is_better)
        our_order = sorted(xs, key=lambda x: ours[(x, series)]["mean"], reverse=fig.higher_is_better)
        best, worst = paper_order[0], paper_order[-1]
        paper_gap = fig.paper[(best, series)] / fig.paper[(worst, series)]
        our_gap = ours[(best, series)]["mean"] / ours[(worst, series)]["mean"]
        verdict = _verdict(paper_order, our_order, {x: ours[(x, series)] for x in xs})
        lines.append(
            f"{fig.series}={series}: ranking {verdict} (best first - paper: {', '.join(map(str, paper_order))}; "
            f"ours: {', '.join(map(str, our_order))}); {fig.metric} {best}/{worst}: paper {paper_gap:.2f}, ours {our_gap:.2f}"
        )
    return lines


def _svg(fig: Figure, ours: dict[Key, dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paper_order = list(dict.fromkeys(x for x, _ in fig.paper))  # the paper's order of bars, then any others
    xs = sorted({x for x, _ in ours}, key=lambda x: (paper_order.index(x) if x in paper_order else len(paper_order), str(x)))
    series = sorted({s for _, s in ours}, key=lambda s: (str(type(s)), s))
    width = 0.8 / max(1, len(series))
    chart, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, s in enumerate(series):
        present = [x for x in xs if (x, s) in ours]
        means = [ours.get((x, s), {}).get("mean", 0.0) for x in (present if fig.line else xs)]
        errs = [
            (ours[(x, s)]["mean"] - ours[(x, s)]["ci95_low"]) if (x, s) in ours else 0.0 for x in (present if fig.line else xs)
        ]
        if fig.line:
            ax.errorbar(present, means, yerr=errs, capsize=2, marker=".", label=f"{fig.series} {s}")
        else:
            ax.bar([j + i * width for j in range(len(xs))], means, width, yerr=errs, capsize=3, label=f"{fig.series} {s}")
    if not fig.line:
        ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(xs))], [str(x) for x in xs])
    ax.set_xlabel(fig.x)
    ax.set_ylabel(f"{fig.metric} ({fig.unit})")
    ax.set_title(fig.title, fontsize=10)
    ax.legend(fontsize=8)
    chart.tight_layout()
    buf = io.StringIO()
    chart.savefig(buf, format="svg")
    plt.close(chart)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _table(headers: list[str], rows: list[list[str]], cls: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def render(folder: Path, suite: Suite) -> Path:
    """Write ``folder/report.html`` from its results.json."""
    meta, rows = results.load(folder)
    parts = [f"<h1>{html.escape(suite.title)}</h1>", f"<p class='paper'>Reproduces: {html.escape(suite.paper)}</p>"]
    parts += _run_section(meta, rows)
    parts.append(_fidelity_section(results.cells(folder)))
    for note in suite.notes:
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    for fig in suite.figures:
        parts += _figure_section(fig, rows)
    style = "body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(suite.title)}</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
    path = Path(folder) / "report.html"
    path.write_text(page)
    return path


def _run_section(meta: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The machine and the run's settings, then whether it was interrupted, the cells skipped and the measurements failed."""
    info = [
        [k, str(meta.get(k))]
        for k in ("kernel", "cpu", "cpus", "nestlab", "python", "reps", "duration_s", "quick", "interrupted")
    ]
    info += [[f"tool {k}", v] for k, v in meta.get("tools", {}).items()]
    parts = [_table(["machine / run", "value"], info, "meta")]
    if meta.get("interrupted"):
        parts.append("<p class='warning'>Interrupted: only the cells finished before Ctrl-C are shown.</p>")
    reasons: dict[str, list[str]] = {}
    for item in meta.get("skipped", []):
        reasons.setdefault(item["why"], []).append(", ".join(f"{k}={v}" for k, v in item["cell"].items()))
    for why, skipped in reasons.items():
        parts.append(
            f"<p class='skipped'>Skipped {len(skipped)} cells ({html.escape(why)}): {html.escape('; '.join(skipped))}</p>"
        )
    failed = [r for r in rows if r.get("error")]
    if failed:
        items = "".join(
            f"<li>{html.escape(', '.join(f'{k}={v}' for k, v in r.items() if k not in ('error', 'pair')))}: {html.escape(r['error'])}</li>"
            for r in failed
        )
        parts.append(f"<p class='warning'>{len(failed)} measurements failed and are left out:</p><ul class='failed'>{items}</ul>")
    return parts


def _figure_section(fig: Figure, rows: list[dict[str, Any]]) -> list[str]:
    """One figure: its plot, our table (mean, interval, noise, fidelity) and how it agrees with the paper."""
    values = per_rep(rows, fig)
    ours = {key: stats.summarize(v) for key, v in values.items() if v}
    parts = [f'<section class="figure" id="{fig.id}"><h2>{html.escape(fig.title)}</h2>']
    if not ours:
        return parts + ["<p class='empty'>No measurements for this figure in this run.</p></section>"]
    parts.append(f"<figure>{_svg(fig, ours)}</figure>")
    judged = fidelity(rows, fig)
    table = [
        [
            str(x),
            str(s),
            f"{v['mean']:.4g}",
            f"[{v['ci95_low']:.4g}, {v['ci95_high']:.4g}]",
            f"{v['cv_pct']:.1f}",
            str(v["n"]),
            stats.advice(v),
            judged.get((x, s), "-"),
        ]
        for (x, s), v in sorted(ours.items(), key=lambda kv: str(kv[0]))
    ]
    parts.append(_table([fig.x, fig.series, f"mean {fig.unit}", "95 % CI", "CV %", "reps", "noisy?", "fidelity"], table, "ours"))
    return parts + _paper_parts(fig, ours) + ["</section>"]


def _paper_parts(fig: Figure, ours: dict[Key, dict[str, Any]]) -> list[str]:
    """The paper's claim or figures beside ours, and where they agree."""
    if fig.claim:
        return [
            f"<p class='paper'>Paper ({html.escape(fig.paper_ref)}): {html.escape(fig.claim)}</p>",
            "<ul class='agreement'>" + "".join(f"<li>{html.escape(line)}</li>" for line in agreement(fig, ours)) + "</ul>",
        ]
    if not fig.paper:
        return []
    paper_rows = [[str(x), str(s), f"{v:g}"] for (x, s), v in sorted(fig.paper.items(), key=lambda kv: str(kv[0]))]
    lines = agreement(fig, ours) or ["not enough common cells to compare the ranking"]
    return [
        f"<p class='paper-ref'>Paper: {html.escape(fig.paper_ref)}</p>",
        _table([fig.x, fig.series, f"paper {fig.paper_unit or fig.unit}"], paper_rows, "paper"),
        "<ul class='agreement'>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>",
    ]


def compare(first: Path, second: Path, suite: Suite) -> list[dict[str, Any]]:
    """Per figure and cell: both means and second/first with its 95 % interval."""
    (_, rows_a), (_, rows_b) = results.load(first), results.load(second)
    out = []
    for fig in suite.figures:
        a, b = per_rep(rows_a, fig), per_rep(rows_b, fig)
        for key in sorted(set(a) & set(b), key=str):
            r = stats.ratio(b[key], a[key])
            out.append(
                {
                    "figure": fig.id,
                    fig.x: key[0],
                    fig.series: key[1],
                    "first": statistics.fmean(a[key]),
                    "second": statistics.fmean(b[key]),
                    "ratio": r["ratio"],
                    "ci95_low": r["ci95_low"],
                    "ci95_high": r["ci95_high"],
                }
            )
    return out
