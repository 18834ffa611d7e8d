"""``nestlab graph --serve``: a single page that draws a running lab and keeps it current.

The page (static/index.html) draws the lab with Cytoscape.js and its fCoSE layout, which keeps
groups and clusters apart (vendored under static/vendor/, MIT, so the page works offline) and asks this server every half second for ``/state.json``: each link's
state and rate, read from the kernel (one link dump per namespace), and each wireless medium's stations where they
are, with their range and each pair in range coloured by its rate.  Clicking a node asks
``/node.json`` for its interfaces and addresses; a link's buttons ``POST /link``, which changes
it exactly as ``nestlab link set`` does.  The server listens on 127.0.0.1 unless told otherwise, and answers
only requests that carry its token (drawn at start, printed in the page's address alone, as Jupyter's): any user of
the machine may connect to it, only its starter may see or change the lab through it (docs/security.md).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from .. import names
from ..backends.kernel import libc, rtdump
from ..backends.kernel.rtdump import LinkInfo
from ..errors import LabError
from ..lab import wireless
from ..lab.lab import Lab
from ..model.endpoint import Endpoint
from ..model.errors import TopologyError
from . import graph

STATIC = Path(__file__).parent / "static"
VENDORED = {f"/vendor/{p.name}": p for p in (STATIC / "vendor").glob("*.js")}


def dump(lab: str, node: str) -> list[rtdump.LinkInfo]:
    """A node's interfaces, read from its namespace (empty if it is gone)."""
    return rtdump.of_namespace(names.netns_path(lab, node))


class LiveState:
    """Each link's state and rate in each direction (bytes/s between two reads of the kernel's counters)."""

    def __init__(self, running: Lab):
        self.lab = running
        self.elements = graph.elements(running.plan)
        self.previous: tuple[float, dict[tuple[str, str], LinkInfo]] | None = None
        self.lock = threading.Lock()

    def read(self) -> dict[str, Any]:
        with self.lock:
            now = time.monotonic()
            counters = {(node, i.name): i for node in self.lab.plan.nodes for i in dump(self.lab.name, node)}
            before_t, before = self.previous or (now, counters)
            self.previous = (now, counters)
            dt = max(now - before_t, 1e-3)
            links = {}
            for edge in (e["data"] for e in self.elements["edges"]):
                ends = [Endpoint(edge["a"]).key] + ([Endpoint(edge["b"]).key] if edge["kind"] == "link" else [])
                infos = [counters.get(end) for end in ends]
                up = all(i is not None and i.admin_up and i.state not in ("DOWN", "LOWERLAYERDOWN", "NOTPRESENT") for i in infos)
                rates = [(i.tx_bytes - before[end].tx_bytes) / dt if i and end in before else 0.0 for end, i in zip(ends, infos)]
                links[edge["id"]] = {"state": "up" if up else "down", "bytes_per_s": rates}
            return {"time": time.time(), "links": links, "wireless": self.radio()}

    def radio(self) -> dict[str, Any]:
        """Each wireless medium's stations (position, reach) and pairs in range with their rates (docs/wireless.md)."""
        out = {}
        for name in wireless.media(self.lab):
            try:
                state = wireless.state(self.lab, name)
            except LabError:
                continue
            out[name] = {k: state[k] for k in ("stations", "pairs", "top_rate")}
        return out


class Handler(BaseHTTPRequestHandler):
    live: LiveState
    token: str  # the page's address carries it (?token=), its requests the X-Live-Token header

    def _allowed(self) -> bool:
        """The request carries the server's token (header or query): any other is answered 403, unread."""
        given = self.headers.get("X-Live-Token") or parse_qs(urlparse(self.path).query).get("token", [""])[0]
        return hmac.compare_digest(given.encode(), self.token.encode())

    def log_message(self, *args: Any) -> None:  # quiet: the terminal shows the URL, not every poll
        pass

    def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data: Any, code: int = 200) -> None:
        self._send(code, json.dumps(data).encode())

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path in VENDORED:  # the page's scripts: public code, nothing of the lab
            return self._send(200, VENDORED[url.path].read_bytes(), "text/javascript")
        if not self._allowed():
            return self._json({"error": REFUSED}, 403)
        if url.path == "/":
            self._send(200, (STATIC / "index.html").read_bytes(), "text/html; charset=utf-8")
        elif url.path == "/graph.json":
            self._json({"lab": self.live.lab.name, **self.live.elements})
        elif url.path == "/state.json":
            self._json(self.live.read())
        elif url.path == "/node.json":
            node = parse_qs(url.query).get("name", [""])[0]
            obj = self.live.lab.plan.nodes.get(node)
            if obj is None:
                return self._json({"error": f"no node {node}"}, 404)
            interfaces = [
                {"name": i.name, "state": i.state, "mtu": i.mtu, "mac": i.mac, "addresses": i.addresses}
                for i in dump(self.live.lab.name, node)
                if i.name != "lo"
            ]
            self._json({"name": node, "kind": obj.kind, "runtime": obj.runtime, "host": obj.host, "interfaces": interfaces})
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        if not self._allowed():
            return self._json({"error": REFUSED}, 403)
        if urlparse(self.path).path != "/link":
            return self._json({"error": "not found"}, 404)
        try:
            size = int(self.headers.get("Content-Length", 0))
            if not 0 <= size <= MAX_REQUEST:  # any local user may connect: a body is read only up to a bound
                return self._json({"error": f"a request is at most {MAX_REQUEST} bytes"}, 413)
            ask = json.loads(self.rfile.read(size) or b"{}")
            spent = Lab.running(self.live.lab.name).link(ask["a"], ask["b"]).set(state=ask["state"])
        except (LabError, TopologyError, KeyError, ValueError) as exc:
            return self._json({"error": str(exc)}, 400)
        self._json({"ok": True, "ms": spent})


MAX_REQUEST = 4096  # bytes of a POST /link body ({"a": ..., "b": ..., "state": ...})
REFUSED = "open the address nestlab printed (its ?token= is this server's)"


def listening(running: Lab, host: str = "127.0.0.1", port: int = 8080) -> tuple[ThreadingHTTPServer, str]:
    """The live page's server, listening (not yet serving), and the page's address with its token."""
    token = secrets.token_urlsafe(24)
    server = ThreadingHTTPServer((host, port), type("LabHandler", (Handler,), {"live": LiveState(running), "token": token}))
    return server, f"http://{host}:{server.server_address[1]}/?token={token}"


def serve(running: Lab, host: str = "127.0.0.1", port: int = 8080, ready: Callable[[str], None] | None = None) -> None:
    """Serve the live page until interrupted; ``ready(url)`` is called once it listens."""
    libc.most_files()  # a socket per namespace while a poll runs
    server, url = listening(running, host, port)
    with server:
        if ready:
            ready(url)
        server.serve_forever()
