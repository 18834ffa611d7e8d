"""A lab's pods on Kubernetes as the places its commands run: each command relayed through the API's exec
(kube_exec.py), as ``ssh`` runs one on a server (ssh.py); :func:`each` works on every pod at once."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ... import names
from ...errors import LabError


class PodRemote:
    """A share's pod, run through ``kubectl exec``'s API as ``ssh`` runs a command on a server (``plugins.Remote``);
    ``found``: the cluster as the lab's record names it (``kubeconfig``, ``namespace``)."""

    def __init__(self, found: dict[str, Any], pod: str):
        self.found, self.name = found, pod

    def nestlab_cmd(self, *args: str) -> list[str]:
        return ["nestlab", *args]

    def popen(self, args: Sequence[str], tty: bool = False, stream: bool = False, **kwargs: Any) -> subprocess.Popen[Any]:
        """A local process that stands for ``args`` in the pod (its output and exit code are the command's;
        each its own exec session, a ``stream`` too); a ``stdin`` piped here is relayed (but not its end)."""
        if tty:
            raise LabError(
                f"an interactive shell on a lab on Kubernetes: kubectl exec -it -n {self.found['namespace']} {self.name} -- "
                + shlex.join(args)
            )
        relay = [
            *names.python_module("nestlab.backends.remote.kube_exec"),
            self.found.get("kubeconfig") or "",
            self.found["namespace"],
            self.name,
            *(["--stdin"] if kwargs.get("stdin") == subprocess.PIPE else []),
            "--",
            *args,
        ]
        return subprocess.Popen(relay, **kwargs)

    def run(
        self, args: Sequence[str], stdin: str | None = None, timeout: float = 600, tty: bool = False
    ) -> subprocess.CompletedProcess[Any]:
        proc = self.popen(
            args,
            tty,
            stdin=subprocess.PIPE if stdin else None,
            stdout=None if tty else subprocess.PIPE,
            stderr=None if tty else subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(stdin, timeout=timeout)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    def close(self) -> None:
        pass


def each(pods: dict[str, str], work: Callable[[str, str], Any]) -> dict[str, Any]:
    """``work(share, pod)`` for every share at once; per share its result or the exception it raised."""

    def guarded(item: tuple[str, str]) -> Any:
        try:
            return work(*item)
        except Exception as exc:  # noqa: BLE001 - reported per share by the caller
            return exc

    with ThreadPoolExecutor(max(1, len(pods))) as pool:
        return dict(zip(pods, pool.map(guarded, pods.items())))
