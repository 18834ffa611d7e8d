#!/usr/bin/env python3
"""`nestlab serve`'s overhead (docs/serve.md): the quickstart deployed through the API against the same deploy from
the shell, by the same ordinary user (rootless) and by root (an administrator's lab), as a ratio; then USERS users
each deploying the quickstart at the same moment and destroying it at the same moment (wall time, slowest answer);
then a BIG-node lab deployed both ways (one round); then TERMINALS terminals open at once on one node, each an
echo's round trip ECHOES times (p50, p99); then the lab list with LABS labs of USERS users, its p50 and p99 as one
user and as an administrator (who sees them all).

Users are made for the run (and removed after), the server runs from a venv of Debian's Python with nestlab[serve]
installed from this checkout, on 127.0.0.1 over plain HTTP (TLS would time the handshake, not nestlab).

Usage (root):  python benchmarks/serve.py [--rounds 5] [--labs 50] [--users 5] [--lists 200] [--big 100] [--terminals 20]
               python benchmarks/serve.py --smoke      (1 round, 2 labs of 1 user, 10 lists, 3 nodes, 2 terminals)
"""

from __future__ import annotations

import argparse
import functools
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import websocket
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _smoke  # noqa: E402
from nestlab.testbeds import apiserver  # noqa: E402

PASSWORD = "Bench-pass-1"
QUICKSTART = (ROOT / "examples" / "quickstart.yml").read_text()
QUICKSTART_NODE = "h1"  # a node of the quickstart with a shell


def _topology(name: str) -> str:
    return QUICKSTART.replace("name: quickstart", f"name: {name}")


def _line(nodes: int) -> Callable[[str], str]:
    """A lab of ``nodes`` linux nodes in a line, as YAML text, given its name."""

    def text(name: str) -> str:
        lab = {
            "name": name,
            "topology": {
                "nodes": {f"n{i}": {"kind": "linux"} for i in range(nodes)},
                "links": [{"endpoints": [f"n{i}:eth1", f"n{i + 1}:eth2"]} for i in range(nodes - 1)],
            },
        }
        return yaml.safe_dump(lab, sort_keys=False)

    return text


def _shell(venv: Path, user: str | None, *args: str) -> float:
    """Seconds a nestlab command takes from the shell, as ``user`` (root when None)."""
    command = [str(venv / "bin" / "nestlab"), *args]
    if user:
        command = ["runuser", "-u", user, "--", "env", f"HOME={pwd.getpwnam(user).pw_dir}", *command]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd="/tmp")
    return time.perf_counter() - started


def _api(server: apiserver.Server, method: str, path: str, token: str, body: object = None) -> float:
    started = time.perf_counter()
    got = server.call(method, path, body, token)
    if got.status != 200:
        raise RuntimeError(f"{method} {path}: {got.status} {got.text[:500]}")
    return time.perf_counter() - started


def deploys(
    server: apiserver.Server,
    venv: Path,
    user: str,
    token: str,
    as_root: bool,
    rounds: int,
    topology: Callable[[str], str] = _topology,
) -> tuple[float, float]:
    """Best of ``rounds`` for a deploy of ``topology`` (the quickstart) through the API and from the shell, taking turns."""
    name = "bench-serve-qs"
    who = None if as_root else user
    file = Path(tempfile.mkdtemp(prefix="bench-serve-", dir="/tmp")) / f"{name}.yml"
    file.write_text(topology(name))
    file.parent.chmod(0o755)
    file.chmod(0o644)
    api, shell = [], []
    try:
        for _ in range(rounds):
            api.append(_api(server, "POST", "/api/v1/labs", token, {"topologyContent": topology(name)}))
            _api(server, "DELETE", f"/api/v1/labs/{name}?cleanup=true", token)
            shell.append(_shell(venv, who, "deploy", "-t", str(file)))
            _shell(venv, who, "destroy", "--lab", name)
    finally:
        shutil.rmtree(file.parent, ignore_errors=True)
    return min(api), min(shell)


def _timed(server: apiserver.Server, method: str, path: str, body: object, token: str) -> tuple[apiserver.Answer, float]:
    started = time.perf_counter()
    got = server.call(method, path, body, token)
    return got, time.perf_counter() - started


def at_once(server: apiserver.Server, tokens: list[str]) -> tuple[float, float, float]:
    """Seconds for every user's quickstart deployed at once, then destroyed at once, and the slowest answer."""
    phases = []
    for method, path, body in (
        ("POST", "/api/v1/labs", {"topologyContent": _topology("bench-serve-many")}),
        ("DELETE", "/api/v1/labs/bench-serve-many?cleanup=true", None),
    ):
        started = time.perf_counter()
        with ThreadPoolExecutor(len(tokens)) as pool:
            answers = list(pool.map(functools.partial(_timed, server, method, path, body), tokens))
        phases.append((time.perf_counter() - started, max(seconds for _, seconds in answers)))
        if failed := [a.text[:300] for a, _ in answers if a.status != 200]:
            raise RuntimeError(f"{method} {path}: {len(failed)} of {len(tokens)} failed: {failed[0]}")
    return phases[0][0], phases[1][0], max(slowest for _, slowest in phases)


def lists(server: apiserver.Server, tokens: dict[str, str], labs: int, count: int, admin: str) -> dict[str, tuple[float, float]]:
    """p50/p99 (ms) of the lab list with ``labs`` labs spread over the users, as one user and as the administrator."""
    owners = sorted(u for u in tokens if u != admin)
    made = []
    for i in range(labs):
        owner = owners[i % len(owners)]
        name = f"bench-serve-l{i}"
        _api(server, "POST", "/api/v1/labs", tokens[owner], {"topologyContent": _topology(name)})
        made.append((owner, name))
    try:
        found = {}
        for label, who in (("one user", owners[0]), ("administrator", admin)):
            times = sorted(_api(server, "GET", "/api/v1/labs", tokens[who]) * 1000 for _ in range(count))
            found[label] = (statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))])
        return found
    finally:
        for owner, name in made:
            server.call("DELETE", f"/api/v1/labs/{name}?cleanup=true", token=tokens[owner])


def _echo_times(url: str, tag: str, count: int) -> list[float]:
    """Seconds from sending ``echo TAG-N`` to a node's terminal to reading its answer, ``count`` times."""
    term = websocket.create_connection(url, timeout=60)
    times = []
    try:
        for n in range(count):
            mark, seen = f"{tag}-{n}-done", b""
            started = time.perf_counter()
            term.send(f"echo {tag}-{n}-''done\n")  # the typed line echoes without the mark, the answer holds it
            while mark.encode() not in seen:
                chunk = term.recv()
                seen += chunk if isinstance(chunk, bytes) else chunk.encode()
            times.append(time.perf_counter() - started)
    finally:
        term.close()
    return times


def terminals(server: apiserver.Server, token: str, count: int, echoes: int) -> tuple[float, float]:
    """p50/p99 (ms) of an echo's round trip through ``count`` terminals open at once on one lab's node."""
    name = "bench-serve-term"
    _api(server, "POST", "/api/v1/labs", token, {"topologyContent": _topology(name)})
    try:
        url = f"ws://127.0.0.1:{server.port}/api/v1/labs/{name}/nodes/{QUICKSTART_NODE}/terminal?token={token}"
        with ThreadPoolExecutor(count) as pool:
            found = sorted(t * 1000 for ts in pool.map(lambda i: _echo_times(url, f"t{i}", echoes), range(count)) for t in ts)
    finally:
        server.call("DELETE", f"/api/v1/labs/{name}?cleanup=true", token=token)
    return statistics.median(found), found[min(len(found) - 1, int(len(found) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--labs", type=int, default=50)
    parser.add_argument(
        "--users", type=int, default=5, help="users deploying at once (20: the load test's), owning the labs listed"
    )
    parser.add_argument("--lists", type=int, default=200)
    parser.add_argument("--big", type=int, default=100, help="nodes of the large lab deployed both ways")
    parser.add_argument("--terminals", type=int, default=20, help="terminals open at once")
    parser.add_argument("--echoes", type=int, default=20, help="echo round trips through each terminal")
    args = _smoke.parse(parser, rounds=1, labs=2, users=1, lists=10, big=3, terminals=2, echoes=2)
    admin = "bench-serve-admin"
    wanted = {admin: (PASSWORD, ["clab_admins"]), **{f"bench-serve-u{i}": (PASSWORD, ["clab_api"]) for i in range(args.users)}}
    base = Path(tempfile.mkdtemp(prefix="bench-serve-", dir="/tmp"))
    base.chmod(0o755)
    with apiserver.users(wanted):
        venv = apiserver.venv(ROOT, base)
        server = apiserver.Server(venv, base / "state", "--no-tls")
        try:
            tokens = {user: server.login(user, PASSWORD) for user in wanted}
            user = "bench-serve-u0"
            print(f"| measure (quickstart deploy: best of {args.rounds}) | API | shell | API / shell |")
            print("|---|---|---|---|")
            for label, who, as_root in (("ordinary user (rootless)", user, False), ("administrator (root)", admin, True)):
                api, shell = deploys(server, venv, who, tokens[who], as_root, args.rounds)
                print(f"| deploy, {label} | {api:.3f} s | {shell:.3f} s | {api / shell:.2f}x |")
            api, shell = deploys(server, venv, user, tokens[user], False, 1, _line(args.big))
            print(f"| deploy of {args.big} nodes, ordinary user (one round) | {api:.3f} s | {shell:.3f} s | {api / shell:.2f}x |")
            p50, p99 = terminals(server, tokens[user], args.terminals, args.echoes)
            print(
                f"| echo through {args.terminals} terminals at once ({args.echoes} each) | p50 {p50:.1f} ms | | p99 {p99:.1f} ms |"
            )
            users = [tokens[u] for u in wanted if u != admin]
            deployed, destroyed, slowest = at_once(server, users)
            print(
                f"| {len(users)} users deploy at once, then destroy at once | {deployed:.2f} s, {destroyed:.2f} s | | slowest answer {slowest:.2f} s |"
            )
            for label, (p50, p99) in lists(server, tokens, args.labs, args.lists, admin).items():
                print(
                    f"| GET /api/v1/labs as {label} ({args.labs} labs of {args.users} users, {args.lists} requests) | p50 {p50:.1f} ms | | p99 {p99:.1f} ms |"
                )
        finally:
            server.stop()
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
