"""A lab's report as tables: nodes and their interfaces, MPTCP subflows (inspect, deploy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LabError
from .common import out, print_json

if TYPE_CHECKING:
    from rich.table import Table


IFACES_SHOWN = 12  # in a table, a node with more interfaces (a switch's ports) shows this many and a count


def _table(report: dict, every_interface: bool = False) -> Table:
    from rich.table import Table

    table = Table(title=f"lab {report['lab']}", title_justify="left")
    for column in (
        "node",
        "kind",
        "host",
        "state",
        "cpu s",
        "memory",
        "interface",
        "mode",
        "if-state",
        "mtu",
        "addresses",
        "bridge",
    ):
        table.add_column(column, overflow="fold")
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
                table.add_row(*head, "", "", "", "", "", "")
            else:
                table.add_row(
                    *head,
                    iface["name"],
                    iface["mode"] or "",
                    str(iface["state"]),
                    str(iface["mtu"]),
                    " ".join(iface["addresses"]),
                    iface["master"] or "",
                )
        if more:
            table.add_row(*[""] * 6, f"... {more} more", "", "", "", f"(--node {node['name']} lists them all)", "")
    return table


def _subflow_table(report: dict) -> Table:
    from rich.table import Table

    table = Table(title="MPTCP connections and their subflows", title_justify="left")
    for column in ("node", "token", "subflow", "device", "sent", "received", "retransmits"):
        table.add_column(column, overflow="fold")
    for node in report["nodes"]:
        for conn in node.get("mptcp") or []:
            for i, sub in enumerate(conn["subflows"]):
                head = [node["name"], conn["token"]] if i == 0 else ["", ""]
                table.add_row(
                    *head,
                    f"{sub['local']} -> {sub['remote']}",
                    sub["device"] or "",
                    _bytes(sub["bytes_sent"]),
                    _bytes(sub["bytes_received"]),
                    str(sub["retransmits"] if sub["retransmits"] is not None else ""),
                )
    return table


def _bytes(count: int | None) -> str:
    return "" if count is None else f"{count / 2**20:.1f} MiB"


def show(report: dict, fmt: str, every_interface: bool = False) -> None:
    if fmt == "json":
        print_json(report)
    elif fmt == "table":
        out.print(_table(report, every_interface))
        if any(node.get("mptcp") for node in report["nodes"]):
            out.print(_subflow_table(report))
    else:
        raise LabError(f"--format must be table or json, not '{fmt}'")
