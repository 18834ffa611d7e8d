"""Several nestlab command lines in one interpreter (``python -m nestlab.cli.steps``), for the API server: one
process started as the user does what took one process per command (each an interpreter's start and, for an
ordinary user, an entry into the user's namespaces).  Standard input: a JSON list of command lines, run in order
until one fails; two steps are this module's own: ``["absent", LAB]`` fails (exit 3) when the lab exists, and
``["replace", FROM, TO]`` renames a file.  Standard output:
a JSON list of each step's ``{"code", "stdout", "stderr"}``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from ..engine import state
from ..rootless import ordinary_user
from .app import _run

EXISTS = 3  # the exit code of ``absent`` for a lab that exists


def _absent(lab: str) -> int:
    if lab in state.labs():
        print(f"error lab '{lab}' exists", file=sys.stderr)
        return EXISTS
    return 0


def _step(argv: list[str]) -> int:
    if argv[:1] == ["absent"]:
        return _absent(argv[1])
    if argv[:1] == ["replace"]:
        try:
            os.replace(argv[1], argv[2])
        except OSError as exc:
            print(f"error {exc}", file=sys.stderr)
            return 1
        return 0
    sys.argv = ["nestlab", *argv]
    return _run()


def _captured(argv: list[str]) -> dict[str, Any]:
    """One step run with its standard output and error in files of their own (so whatever it starts inherits a
    file, never the server's pipe); its exit code and what it wrote."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            code = _step(argv)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(file.read().decode(errors="replace"))
    return {"code": code, "stdout": texts[0], "stderr": texts[1]}


def main() -> None:
    steps: list[list[str]] = json.load(sys.stdin)
    results: list[dict[str, Any]] = []

    def run_all() -> int:
        for argv in steps:
            results.append(_captured(argv))
            if results[-1]["code"]:
                break
        return 0

    if ordinary_user(["steps"]):
        from ..rootless import session

        code = session.inside(run_all)
    else:
        code = run_all()
    json.dump(results, sys.stdout)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
