"""The contract containerlab's web app holds `nestlab serve` to (docs/serve.md): its flow replayed as two ordinary
users, call for call as the app made them in a browser, asserting on the fields of each answer the app reads.  One
lab of two nodes on the server the serve tests share."""

from __future__ import annotations

import base64
import json
import pwd
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import websocket
from serve_fixtures import PREFIX, Server

LAB = "nlsv-web"
ALICE, BOB = f"{PREFIX}-alice", f"{PREFIX}-bob"
YAML = f"{LAB}.clab.yml"
NOTES = f"{YAML}.annotations.json"
TOPOLOGY = f"""name: {LAB}
topology:
  nodes:
    a: {{kind: linux, cmd: "sleep 3917.5"}}
    b: {{kind: linux, cmd: "sleep 3927.5"}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
"""
ANNOTATIONS = json.dumps({"nodeAnnotations": [{"id": "a", "position": {"x": 10, "y": 20}}]})


def _raw(server: Server, method: str, path: str, token: str, data: bytes | None = None) -> tuple[int, dict, bytes]:
    """status, headers and body of a request whose body is ``data`` as is (the app PUTs files raw)."""
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=300) as got:
            return got.status, dict(got.headers), got.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def web(server):
    """Alice's token; after, her lab destroyed (by the administrator) and her workspace's lab folder removed."""
    yield server.login(ALICE)
    server.call("DELETE", f"/api/v1/labs/{LAB}?cleanup=true", token=server.login(f"{PREFIX}-admin"))
    shutil.rmtree(Path(pwd.getpwnam(ALICE).pw_dir, ".clab", LAB), ignore_errors=True)


def _save(server: Server, token: str, name: str, text: str) -> None:
    """As the app saves: the whole file to a temporary one, renamed over the file."""
    status, _, body = _raw(server, "PUT", f"/api/v1/labs/workspace/file?path={LAB}/.{name}.tmp", token, text.encode())
    assert status == 200 and json.loads(body)["revision"], body
    moved = server.call(
        "POST", "/api/v1/labs/workspace/file/rename", {"oldPath": f"{LAB}/.{name}.tmp", "newPath": f"{LAB}/{name}"}, token
    )
    assert moved.status == 200, moved.text


def _terminal(server: Server, token: str) -> str:
    """A session on node a: its stream says ready, runs a command typed in, and its output comes back."""
    made = server.call(
        "POST", f"/api/v1/labs/{LAB}/nodes/clab-{LAB}-a/terminal-sessions", {"protocol": "shell", "cols": 77, "rows": 30}, token
    )
    assert made.status == 200 and isinstance(made.body, dict), made.text
    assert (made.body["labName"], made.body["nodeName"], made.body["username"]) == (LAB, "a", ALICE)
    session = made.body["sessionId"]
    url = f"ws://127.0.0.1:{server.port}/api/v1/terminal-sessions/{session}/stream"
    ws = websocket.create_connection(url, header=[f"Authorization: Bearer {token}"], timeout=30)
    try:
        assert json.loads(ws.recv()) == {"type": "ready"}
        ws.send(json.dumps({"type": "resize", "cols": 77, "rows": 30}))
        ws.send(json.dumps({"type": "input", "data": "echo nl-$((6*7)) $(hostname)\r"}))
        seen, deadline = "", time.monotonic() + 20
        while "nl-42 a" not in seen and time.monotonic() < deadline:
            message = json.loads(ws.recv())
            if message["type"] == "output":
                seen += base64.b64decode(message["data"]).decode(errors="replace")
        assert "nl-42 a" in seen, seen
        ws.send(json.dumps({"type": "close"}))
    finally:
        ws.close()
    return str(session)


def test_the_web_apps_flow(server, web):
    """Alice saves a lab in her workspace, opens it, deploys it (streamed), sees its nodes run, types in a terminal,
    limits a link's rate and reads it back, and destroys it; Bob sees none of it: 404 on her lab, file and session."""
    alice = web
    assert server.call("GET", "/api/v1/ui/custom-nodes", token=alice).body == {"customNodes": [], "defaultNode": ""}
    assert server.call("POST", "/api/v1/labs/workspace/directory", {"path": LAB}, alice).status == 200
    _save(server, alice, YAML, TOPOLOGY)
    _save(server, alice, NOTES, ANNOTATIONS)
    tree = server.call("GET", f"/api/v1/labs/workspace/tree?path={LAB}", token=alice).body
    assert [(e["name"], e["path"], e["kind"]) for e in tree] == [
        (YAML, f"{LAB}/{YAML}", "file"),
        (NOTES, f"{LAB}/{NOTES}", "file"),
    ]
    entry = {"labName": LAB, "yamlFileName": YAML, "annotationsFileName": NOTES, "hasAnnotations": True}
    assert _this_lab(server, alice) == [entry | {"deploymentState": "undeployed"}]
    revisions = {}
    for name, text in ((YAML, TOPOLOGY), (NOTES, ANNOTATIONS)):
        status, headers, body = _raw(server, "GET", f"/api/v1/labs/{LAB}/topology/file?path={name}", alice)
        assert (status, body.decode()) == (200, text)
        revisions[name] = headers["x-topology-document-revision"]
    head = _raw(server, "HEAD", f"/api/v1/labs/{LAB}/topology/file?path={YAML}", alice)
    assert head[0] == 200 and head[1]["x-topology-document-revision"] == revisions[YAML] != revisions[NOTES]
    assert server.call("GET", f"/api/v1/labs/{LAB}", token=alice).status == 404

    status, _, body = _raw(server, "POST", f"/api/v1/labs/{LAB}/apply?stream=true&path={YAML}", alice, b"{}")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert status == 200 and {x["type"] for x in lines[:-1]} == {"log"} and lines[-1]["type"] == "done", lines
    listed = server.call("GET", "/api/v1/labs", token=alice).body
    assert {(c["lab_name"], c["name"], c["state"]) for c in listed[LAB]} == {(LAB, f"clab-{LAB}-{n}", "running") for n in "ab"}
    assert _this_lab(server, alice) == [entry | {"deploymentState": "deployed"}]
    dry = server.call("POST", f"/api/v1/labs/{LAB}/apply?path={YAML}&dryRun=true", {}, alice)
    assert dry.body["result"] == {"deployedLab": False}

    session = _terminal(server, alice)
    form = {
        "containerName": f"clab-{LAB}-a",
        "interface": "eth1",
        "delay": "0ms",
        "jitter": "0ms",
        "loss": 0,
        "rate": 2000,
        "corruption": 0,
    }
    shaped = server.call("POST", "/api/v1/tools/netem/set", form, alice)
    assert shaped.status == 200 and shaped.body["message"] == f"Netem parameters of clab-{LAB}-a:eth1 set", shaped.text
    shown = server.call("GET", f"/api/v1/tools/netem/show?containerName=clab-{LAB}-a", token=alice).body
    assert [(x["interface"], x["rate"], x["delay"]) for x in shown[f"clab-{LAB}-a"]] == [("eth1", 2000, "")]

    bob = server.login(BOB)
    assert LAB not in server.call("GET", "/api/v1/labs", token=bob).body
    assert _this_lab(server, bob) == []
    assert server.call("GET", f"/api/v1/labs/{LAB}", token=bob).status == 404
    assert _raw(server, "GET", f"/api/v1/labs/{LAB}/topology/file?path={YAML}", bob)[0] == 404
    assert server.call("GET", f"/api/v1/terminal-sessions/{session}", token=bob).status == 404
    assert server.call("POST", "/api/v1/tools/netem/set", form, bob).status == 404
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(
            f"ws://127.0.0.1:{server.port}/api/v1/terminal-sessions/{session}/stream",
            header=[f"Authorization: Bearer {bob}"],
            timeout=30,
        )
    assert refused.value.status_code == 404
    assert server.call("DELETE", f"/api/v1/terminal-sessions/{session}", token=bob).status == 404
    assert server.call("DELETE", f"/api/v1/terminal-sessions/{session}", token=alice).status == 200

    gone = server.call("DELETE", f"/api/v1/labs/{LAB}?stream=true", token=alice)
    assert gone.status == 200 and gone.body["message"] == f"Lab '{LAB}' destroyed successfully", gone.text
    assert LAB not in server.call("GET", "/api/v1/labs", token=alice).body
    assert _this_lab(server, alice) == [entry | {"deploymentState": "undeployed"}]


def _this_lab(server, token: str) -> list[dict]:
    """The entries of the user's topology files that are this test's lab (the user's other tests leave theirs)."""
    return [e for e in server.call("GET", "/api/v1/labs/topology/files", token=token).body if e["labName"] == LAB]
