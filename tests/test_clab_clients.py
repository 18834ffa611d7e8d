"""The command lines that the VS Code extension, clab-api-server and netlab run (tests/fixtures/clab-clients.yml,
taken from their sources) replayed against a lab through nestlab's containerlab command: each exits 0, and
its JSON has containerlab's fields."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml
from conftest import NESTLAB, ROOT, run_cli

from nestlab.lab import cleanup

CLIENTS = yaml.safe_load((ROOT / "tests" / "fixtures" / "clab-clients.yml").read_text())
LAB = """name: {name}
topology:
  nodes:
    n1: {kind: linux}
    n2: {kind: linux}
  links:
    - endpoints: ["n1:eth1", "n2:eth1"]
"""


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _at(data, path: list[str]):
    """The value at a dotted path, taking the first item of every list on the way."""
    for key in path:
        while isinstance(data, list):
            assert data, f"an empty list before {key}"
            data = data[0]
        assert isinstance(data, dict) and key in data, (key, data)
        data = data[key]
    return data


def _stream(argv: list[str], fields: list[str]) -> None:
    """A command that runs until stopped: its first lines (a container and an interface) have ``fields``."""
    proc = subprocess.Popen([*NESTLAB, "clab", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen: dict[str, dict] = {}
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            seen.setdefault(event["type"], event)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert set(seen) == {"container", "interface"}, (seen, proc.stderr.read())
    for event in seen.values():
        assert all(f in event for f in fields), event


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_clients_command_lines_answer_as_containerlab(client, tmp_path, lab_name):
    topo = tmp_path / f"{lab_name}.clab.yml"
    topo.write_text(LAB.replace("{name}", lab_name))
    values = {"topo": str(topo), "lab": lab_name, "node": "n1", "long": f"clab-{lab_name}-n1", "other": "n2"}
    values["hostif"] = "nl" + lab_name[1:9]
    try:
        for call in CLIENTS[client]["calls"]:
            argv = [_fill(a, values) for a in call["argv"]]
            if "stream" in call:
                _stream(argv, call["stream"])
                continue
            done = run_cli("clab", *argv, timeout=120)
            assert done.returncode == 0, (argv, done.stdout[-500:], done.stderr[-1500:])
            for line in call.get("lines", []):
                assert line in done.stdout, (argv, done.stdout)
            if "json" in call:
                data = json.loads(done.stdout)
                for path in call["json"]:
                    _at(data, _fill(path, values).split("."))
    finally:
        run_cli("clab", "destroy", "--name", lab_name, "--cleanup")
    assert not cleanup.left(lab_name)
