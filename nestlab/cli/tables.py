"""A lab's report as tables: nodes and their interfaces, MPTCP subflows (inspect, deploy).

A table printed to a file or a pipe is drawn here as plain text, the same characters rich draws (rich's layout of
a 500-node page took 0.05 s, its import 0.02 s more); rich draws it for a terminal, and whenever the plain drawing
could differ from rich's (markup, emoji codes, wide or control characters, a table wider than the page).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from .common import out, print_json

if TYPE_CHECKING:
    from rich.console import OverflowMethod
    from rich.table import Table


IFACES_SHOWN = 12  # in a table, a node with more interfaces (a switch's ports) shows this many and a count
NODE_COLUMNS = ("node", "kind", "host", "state", "cpu s", "memory", "interface", "mode", "if-state", "mtu", "addresses", "bridge")
SUBFLOW_COLUMNS = ("node", "token", "subflow", "device", "sent", "received", "retransmits")
PAGE = 200  # the width rich is given when its output is not a terminal (cli/common.py)
_EMOJI_CODE = re.compile(r":\S+?:")  # what rich may take for an emoji's name (:cd: is one)


def _node_rows(report: Mapping[str, Any], every_interface: bool = False) -> list[list[str]]:
    rows = []
    for node in report["nodes"]:
        ifaces = node["interfaces"] or [None]
        kind = node["kind"] + (f" ({node['detail']})" if node.get("detail") else "")  # what its kind says of it
        kind += f" [{node['runtime']}]" if node.get("runtime", "namespace") != "namespace" else ""
        kind += f" holding {len(node['components'])} components" if node.get("components") else ""
        usage = node.get("usage") or {}
        cpu = f"{usage['cpu_s']:.2f}" if usage else ""
        memory = f"{usage['memory_bytes'] / 2**20:.1f} MiB" if usage else ""
        more = len(ifaces) - IFACES_SHOWN + 1 if len(ifaces) > IFACES_SHOWN and not every_interface else 0
        for i, iface in enumerate(ifaces[: len(ifaces) - more]):
            head = (
                [node["name"], kind, node["host"] or node.get("server") or "", node["state"], cpu, memory] if i == 0 else [""] * 6
            )
            if iface is None:
                rows.append([*head, "", "", "", "", "", ""])
            else:
                rows.append(
                    [
                        *head,
                        iface["name"],
                        iface["mode"] or "",
                        str(iface["state"]),
                        str(iface["mtu"]),
                        " ".join(iface["addresses"]),
                        iface["master"] or "",
                    ]
                )
        if more:
            rows.append([*[""] * 6, f"... {more} more", "", "", "", f"(--node {node['name']} lists them all)", ""])
    return rows


def _subflow_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for node in report["nodes"]:
        for conn in node.get("mptcp") or []:
            for i, sub in enumerate(conn["subflows"]):
                head = [node["name"], conn["token"]] if i == 0 else ["", ""]
                rows.append(
                    [
                        *head,
                        f"{sub['local']} -> {sub['remote']}",
                        sub["device"] or "",
                        _bytes(sub["bytes_sent"]),
                        _bytes(sub["bytes_received"]),
                        str(sub["retransmits"] if sub["retransmits"] is not None else ""),
                    ]
                )
    return rows


def _bytes(count: int | None) -> str:
    return "" if count is None else f"{count / 2**20:.1f} MiB"


def print_table(
    columns: tuple[str, ...], rows: list[list[str]], title: str | None = None, overflow: OverflowMethod = "fold"
) -> None:
    """``rows`` under ``columns`` on standard output, as rich draws a table (``title`` above it, on the left;
    ``overflow``: how rich fits a cell too wide for the terminal)."""
    text = _plain(columns, rows, title) if _plain_output() else None
    if text is not None:
        sys.stdout.write(text)
    else:
        out.print(_rich(columns, rows, title, overflow))


def _plain_output() -> bool:
    """Whether rich would draw to standard output without colour or styles, in UTF-8 box characters, 200 wide."""
    environ = os.environ
    return (
        not sys.stdout.isatty()
        and "FORCE_COLOR" not in environ
        and environ.get("TTY_COMPATIBLE") != "1"
        and (sys.stdout.encoding or "").lower().startswith("utf")
    )


def _plain(columns: tuple[str, ...], rows: list[list[str]], title: str | None) -> str | None:
    """The table as rich draws it into a page of :data:`PAGE` columns, or None when that drawing could differ."""
    cells = [*columns, *(cell for row in rows for cell in row), title or ""]
    if not all(cell.isascii() and cell.isprintable() and "[" not in cell for cell in cells):
        return None
    if any(_EMOJI_CODE.search(cell) for cell in cells) and _has_emoji(cells):
        return None
    widths = [max([len(column), *(len(row[i]) for row in rows)]) for i, column in enumerate(columns)]
    width = sum(widths) + 3 * len(widths) + 1
    if width > PAGE or (title is not None and len(title) > width):
        return None

    def rule(left: str, line: str, cross: str, right: str) -> str:
        return left + cross.join(line * (w + 2) for w in widths) + right + "\n"

    def line(edge: str, cells: list[str] | tuple[str, ...]) -> str:
        return edge + edge.join(f" {cell.ljust(w)} " for cell, w in zip(cells, widths, strict=True)) + edge + "\n"

    body = "".join(line("│", row) for row in rows)
    head = rule("┏", "━", "┳", "┓") + line("┃", columns) + rule("┡", "━", "╇", "┩")
    return (f"{title.ljust(width)}\n" if title is not None else "") + head + body + rule("└", "─", "┴", "┘")


def _has_emoji(cells: list[str]) -> bool:
    """Whether rich would draw an emoji for a ``:name:`` in ``cells`` (IPv6 addresses have colons)."""
    from rich.emoji import Emoji

    return any(Emoji.replace(cell) != cell for cell in cells)


def _rich(columns: tuple[str, ...], rows: list[list[str]], title: str | None, overflow: OverflowMethod = "fold") -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow=overflow)
    for row in rows:
        table.add_row(*row)
    return table


def show(report: Mapping[str, Any], fmt: str, every_interface: bool = False) -> None:
    if fmt == "json":
        print_json(report)
    elif fmt == "table":
        print_table(NODE_COLUMNS, _node_rows(report, every_interface), f"lab {report['lab']}")
        if any(node.get("mptcp") for node in report["nodes"]):
            print_table(SUBFLOW_COLUMNS, _subflow_rows(report), "MPTCP connections and their subflows")
    else:
        raise LabError(f"--format must be table or json, not '{fmt}'")
