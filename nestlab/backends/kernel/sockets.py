"""The sockets of a network namespace, as a ``/proc/<pid>/net`` folder lists them
(``/proc/thread-self/net``: the namespace the calling thread is in)."""

from __future__ import annotations

_TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


def _rows(net: str, tables: tuple[str, ...]) -> list[list[str]]:
    """Each socket of ``net``'s ``tables``, split into its columns; a table that cannot be read (no
    IPv6 in this kernel, the process gone) has none."""
    rows = []
    for table in tables:
        try:
            with open(f"{net}/{table}") as fh:
                rows += [line.split() for line in fh.readlines()[1:]]
        except OSError:
            continue
    return rows


def listening(pid: int, port: int) -> bool:
    """Whether the network namespace of ``pid`` has a TCP socket listening on ``port`` (IPv4 or IPv6)."""
    rows = _rows(f"/proc/{pid}/net", ("tcp", "tcp6"))
    return any(row[1].endswith(f":{port:04X}") and row[3] == _TCP_LISTEN for row in rows)


def serving(net: str = "/proc/thread-self/net") -> int:
    """How many TCP sockets listen and UDP sockets are bound in ``net``'s namespace."""
    listeners = sum(row[3] == _TCP_LISTEN for row in _rows(net, ("tcp", "tcp6")))
    return listeners + len(_rows(net, ("udp", "udp6")))
