"""Headless Chromium driven over the DevTools protocol: open a page, evaluate JavaScript, take a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


class Browser:
    """One headless Chromium with one page; always ``close()`` it (a context manager does)."""

    def __init__(self, url: str, width: int = 1280, height: int = 800):
        self.profile = tempfile.mkdtemp(prefix="nestlab-chromium-")
        self.proc = subprocess.Popen(
            [
                shutil.which("chromium") or "chromium",
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port = self._port()
        with urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}/json/new?{url}", method="PUT"), timeout=30
        ) as reply:
            target = json.load(reply)
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        self.seq = 0

    def _port(self) -> int:
        marker = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(marker) and open(marker).read().strip():
                return int(open(marker).read().split()[0])
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params):
        self.seq += 1
        self.ws.send(json.dumps({"id": self.seq, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.seq:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply["result"]

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30, every: float = 0.05):
        """Evaluate until truthy; returns (value, seconds waited)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            value = self.eval(expression)
            if value:
                return value, time.monotonic() - started
            time.sleep(every)
        raise AssertionError(f"timed out waiting for {expression}")

    def screenshot(self, path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
