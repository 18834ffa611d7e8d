"""Shared fixtures. Every test runs against the real kernel as root, and nothing of ours may outlive it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from nestlab import Lab
from nestlab.lab import cleanup, state

ROOT = Path(__file__).resolve().parent.parent
NESTLAB = [sys.executable, "-m", "nestlab.cli.app"]


def pytest_configure(config):
    if os.geteuid() != 0:
        raise pytest.UsageError("nestlab's tests create namespaces and links: run them as root (make test)")


def leftovers() -> list[str]:
    """Everything on this machine that carries nestlab's marker."""
    found = [f"namespace {p}" for p in cleanup.marked_namespaces()]
    found += [f"state of lab {lab}" for lab in state.labs() if os.path.isdir(f"/run/nestlab/{lab}")]
    with open("/proc/self/mountinfo") as fh:
        found += [f"mount {line.split()[4]}" for line in fh if "/run/nestlab/" in line.split()[4]]
    return found


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Fail any test after which something marked remains (and remove it, so the next test starts clean)."""
    assert not leftovers(), f"objects left by an earlier test: {leftovers()}"
    yield
    left = leftovers()
    if left:
        for lab in state.labs():
            cleanup.remove_lab(lab)
        pytest.fail(f"test left these behind: {left}")


@pytest.fixture
def lab_name() -> str:
    return "t" + uuid.uuid4().hex[:8]


@pytest.fixture
def topo_file(tmp_path, lab_name):
    """Write a topology (``{name}`` is replaced by a unique lab name) and destroy that lab afterwards."""
    made: list[str] = []

    def write(text: str, filename: str = "lab.yml") -> Path:
        path = tmp_path / filename
        path.write_text(text.replace("{name}", lab_name))
        made.append(lab_name)
        return path

    yield write
    for name in made:
        cleanup.remove_lab(name)


@pytest.fixture
def lab_from(topo_file):
    """Deploy a topology text and return the running Lab; always destroyed afterwards."""
    labs: list[Lab] = []

    def deploy(text: str) -> Lab:
        lab = Lab.from_file(topo_file(text))
        labs.append(lab)
        lab.deploy()
        return lab

    yield deploy
    for lab in labs:
        lab.destroy()


def run_cli(*args: str, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*NESTLAB, *args], capture_output=True, text=True, timeout=timeout, check=check, cwd=ROOT)


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(": ")[1].split("@")[0] for line in out.splitlines()}
