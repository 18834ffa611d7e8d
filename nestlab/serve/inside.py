"""What the server reads of a lab that only its owner's namespaces show, run as the owner (``python -m
nestlab.serve.inside VERB ...``): ``logs LAB NODE TAIL`` prints the node's ``cmd`` output (its cmd.log), the last
TAIL lines (0: all)."""

from __future__ import annotations

import os
import sys
from collections import deque

from .. import names
from ..rootless import ordinary_user


def logs(lab: str, node: str, tail: str) -> int:
    path = os.path.join(names.node_dir(lab, node), "cmd.log")
    try:
        with open(path, errors="replace", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as f:
            lines = deque(f, maxlen=int(tail) or None)
    except FileNotFoundError:
        return 0  # a node without a cmd: nothing logged
    sys.stdout.write("".join(lines))
    return 0


VERBS = {"logs": logs}


def main() -> None:
    verb, *args = sys.argv[1:]

    def run() -> int:
        return VERBS[verb](*args)

    if ordinary_user(sys.argv):
        from ..rootless import session

        code = session.inside(run)
    else:
        code = run()
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
