"""Forward ports of this machine's loopback to a node (containerlab's ``ports:``).

:func:`listen` binds 127.0.0.1:HOST in the calling thread's namespace (this machine's) before anything
runs; the forwarder (``python -m nestlab.backends.services.portfwd``) is then started inside the node's network
namespace, holding those sockets: it accepts on this machine's side and connects to 127.0.0.1:NODE on
the node's side, so the node needs no route to this machine, and it ends with the node.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import socket
import sys
from typing import cast

from ... import names
from ...errors import LabError

LOOPBACK = "127.0.0.1"


def listen(node: str, ports: tuple[tuple[int, int, str], ...]) -> list[tuple[socket.socket, int, str]]:
    """Bound sockets on this machine's loopback, one per forwarded port: (socket, node port, protocol)."""
    made: list[tuple[socket.socket, int, str]] = []
    try:
        for host, inner, proto in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
            made.append((sock, inner, proto))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((LOOPBACK, host))
            except OSError as exc:
                why = "is in use by another program" if exc.errno == errno.EADDRINUSE else exc.strerror
                raise LabError(
                    f"node {node}: port {LOOPBACK}:{host}/{proto} (ports: {host}:{inner}) {why}; pick another host port"
                ) from None
            if proto == "tcp":
                sock.listen(128)
    except BaseException:
        for sock, _, _ in made:
            sock.close()
        raise
    return made


def command(listeners: list[tuple[socket.socket, int, str]]) -> list[str]:
    """The forwarder's command line (the sockets' fds must be passed to it)."""
    return [*names.python_module(__name__), *(f"{proto}:{sock.fileno()}:{inner}" for sock, inner, proto in listeners)]


def start(net_path: str, uts_path: str, node: str, ports: tuple[tuple[int, int, str], ...]) -> None:
    """Start the node's forwarder inside its network namespace, holding its loopback listeners."""
    from ..kernel import containers, detached

    listeners = listen(node, ports)
    try:
        containers.popen_in(
            net_path,
            uts_path,
            [],
            command(listeners),
            **detached.options(pass_fds=[sock.fileno() for sock, _, _ in listeners]),
        )
    finally:
        for sock, _, _ in listeners:
            sock.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _tcp(listener: socket.socket, port: int) -> None:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            inner_reader, inner_writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, inner_writer), _pipe(inner_reader, writer))

    server = await asyncio.start_server(client, sock=listener)
    await server.serve_forever()


class _Udp(asyncio.DatagramProtocol):
    """Each client address gets a socket of its own towards the node, whose answers go back to that client."""

    def __init__(self, port: int):
        self.port = port
        self.outer: asyncio.DatagramTransport | None = None
        self.inner: dict[tuple[str, int], asyncio.DatagramTransport] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.outer = cast(asyncio.DatagramTransport, transport)  # a datagram endpoint's (asyncio's own does not subclass it)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if addr in self.inner:
            self.inner[addr].sendto(data)
        else:
            asyncio.ensure_future(self._open(addr, data))

    async def _open(self, addr: tuple[str, int], first: bytes) -> None:
        outer = self.outer
        assert outer is not None  # connection_made came first
        back_to = outer.sendto

        class Back(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, _from: tuple[str, int]) -> None:
                back_to(data, addr)

        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(Back, remote_addr=(LOOPBACK, self.port))
        self.inner[addr] = transport
        transport.sendto(first)


async def _main(specs: list[str]) -> None:
    tasks = []
    loop = asyncio.get_running_loop()
    for spec in specs:
        proto, fd, port = spec.split(":")
        sock = socket.socket(fileno=int(fd))
        if proto == "tcp":
            tasks.append(_tcp(sock, int(port)))
        else:
            await loop.create_datagram_endpoint(functools.partial(_Udp, int(port)), sock=sock)
    await asyncio.gather(*tasks, asyncio.Event().wait())


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
