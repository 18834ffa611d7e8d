"""Traffic checks run inside nodes: ping, and TCP/UDP echo through small Python servers."""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap

SERVER = textwrap.dedent(
    """
    import socket, sys
    kind = socket.SOCK_STREAM if sys.argv[1] == "tcp" else socket.SOCK_DGRAM
    srv = socket.socket(socket.AF_INET, kind); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", int(sys.argv[2]))); print("ready", flush=True)
    if kind == socket.SOCK_STREAM:
        srv.listen(1); conn, peer = srv.accept(); data = conn.recv(100)
        conn.sendall(data.upper() + b" seen-from " + peer[0].encode())
    else:
        data, peer = srv.recvfrom(100); srv.sendto(data.upper() + b" seen-from " + peer[0].encode(), peer)
    """
)
CLIENT = textwrap.dedent(
    """
    import socket, sys
    kind = socket.SOCK_STREAM if sys.argv[1] == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET, kind); s.settimeout(10)
    s.connect((sys.argv[3], int(sys.argv[2]))); s.send(b"hello")
    print(s.recv(200).decode())
    """
)


def ping(node, ip: str, size: int | None = None, count: int = 1) -> bool:
    args = ["ping", "-c", str(count), "-W", "1", "-i", "0.2"]
    if size is not None:
        args += ["-M", "do", "-s", str(size)]
    proc = node.popen(args + [ip], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc.wait(timeout=15) == 0


def echo(server, client, ip: str, proto: str = "tcp", port: int = 7007) -> str:
    """Send "hello" from ``client`` to ``server`` at ``ip``; returns the reply ("HELLO seen-from ADDR") or ""."""
    srv = server.popen([sys.executable, "-c", SERVER, proto, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        out = client.cmd([sys.executable, "-c", CLIENT, proto, str(port), ip], timeout=60)  # slow under emulation (make test-vm)
        return out.strip() if out.startswith("HELLO") else ""
    finally:
        srv.kill()
        srv.wait()


def reaches(a, b, ip: str) -> bool:
    """Ping, TCP echo and UDP echo from ``a`` to ``b`` at ``ip`` all work."""
    return ping(a, ip, count=2) and echo(b, a, ip, "tcp").startswith("HELLO") and echo(b, a, ip, "udp").startswith("HELLO")


def rtts(node, ip: str, count: int = 100) -> list[float]:
    """Each reply's round-trip time in ms of ``count`` pings 10 ms apart from ``node`` to ``ip``."""
    out = node.cmd(["ping", "-n", "-c", str(count), "-i", "0.01", ip], timeout=120)
    return [float(part.split("=")[1]) for part in out.split() if part.startswith("time=")]


def iqr(values: list[float]) -> float:
    """The spread of ``values``: their interquartile range."""
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]
