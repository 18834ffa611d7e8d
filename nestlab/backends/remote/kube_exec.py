"""``python -m nestlab.backends.remote.kube_exec KUBECONFIG NAMESPACE POD [--stdin] -- CMD...``: a local process standing
for a command in a pod (its output as it comes, byte for byte, and its exit code), as ``ssh`` stands for one on a server;
with ``--stdin``, what it reads goes on to the command's standard input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import BinaryIO

from .kube import Cluster, ClusterError


def main(argv: list[str]) -> int:
    kubeconfig, namespace, pod, *rest = argv
    relay = rest[:1] == ["--stdin"]
    dashes, *command = rest[relay:] or [""]
    if dashes != "--" or not command:
        print("usage: python -m nestlab.backends.remote.kube_exec KUBECONFIG NAMESPACE POD [--stdin] -- CMD...", file=sys.stderr)
        return 2

    def to(stream: BinaryIO) -> Callable[[bytes], None]:
        def write(data: bytes) -> None:
            stream.write(data)
            stream.flush()

        return write

    try:
        code, _out, _err = Cluster(kubeconfig or None, namespace).exec(
            pod,
            command,
            timeout=24 * 3600,
            binary=True,
            on_out=to(sys.stdout.buffer),
            on_err=to(sys.stderr.buffer),
            stdin=sys.stdin.buffer if relay else None,
        )
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 255
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
