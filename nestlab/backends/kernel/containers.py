"""Entering nodes: start a process in a node's namespaces and cgroup, and remember a node's init process.

A plain node is entered with ``setns`` into its pinned network and UTS namespaces.  A node
with an init of its own (nestlab.runtimes: isolated, runc, docker) is entered through that
init's namespaces (PID and mount included) from a short-lived thread, so the caller's
namespaces never change, joining the node's cgroup before ``exec``.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ... import names
from . import files, libc, namespaces

_T = TypeVar("_T")

_ENTER = (
    ("ipc", libc.CLONE_NEWIPC),
    ("uts", libc.CLONE_NEWUTS),
    ("net", libc.CLONE_NEWNET),
    ("pid", libc.CLONE_NEWPID),
    ("mnt", libc.CLONE_NEWNS),
)


def _joiner(cgroup_files: Sequence[str]) -> tuple[Callable[[], None] | None, list[int]]:
    """A ``preexec_fn`` that moves the new process into its cgroup(s) before it runs anything.

    The files are opened now, in the caller's mount namespace: the child may be in one
    (a container's) where the cgroup filesystem is not visible.  Close the fds afterwards.
    """
    if not cgroup_files:
        return None, []
    fds = [os.open(f, os.O_WRONLY | os.O_CLOEXEC) for f in cgroup_files]

    def join() -> None:
        for fd in fds:
            os.write(fd, b"0")

    return join, fds


# What a process started in a node keeps of its caller's environment: paths, locale, terminal and
# nestlab's own settings.  Anything else (tokens, cloud keys, an SSH agent's socket) stays out
# unless passed by name (``nestlab exec --env NAME``, or ``env=`` in Python).
KEPT_ENV = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "VIRTUAL_ENV"}
)


def node_env(given: dict[str, str] | None) -> dict[str, str]:
    """The environment of a process started in a node: the kept part of ours, then ``given``."""
    kept = {k: v for k, v in os.environ.items() if k in KEPT_ENV or k.startswith(("LC_", "NESTLAB_"))}
    return {**kept, **(given or {})}


def _popen(cgroup_files: Sequence[str], args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    join, fds = _joiner(cgroup_files)
    try:
        return subprocess.Popen(args, preexec_fn=join, **{**kwargs, "env": node_env(kwargs.get("env"))})
    finally:
        for fd in fds:
            os.close(fd)


def in_thread(work: Callable[[], _T]) -> _T:
    """Run ``work`` in a fresh thread (namespace changes die with it) and return its result."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="nestlab-enter")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]
    return value


def popen_in(
    netns: str, uts: str, cgroup_files: Sequence[str], args: Sequence[str], view: str | None = None, **kwargs: Any
) -> subprocess.Popen[Any]:
    """Start a process in a plain node's network and UTS namespaces (and its filesystem view, the
    mount namespace pinned at ``view``), inside its cgroup."""
    if view:

        def work() -> subprocess.Popen[Any]:
            namespaces.join(netns, uts, view)
            return _popen(cgroup_files, args, **kwargs)

        return in_thread(work)
    with namespaces.entered(netns, uts):
        return _popen(cgroup_files, args, **kwargs)


def spawn(init_pid: int, cgroup_files: Sequence[str], args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a process in every namespace of ``init_pid`` (PID and mount included) and the given cgroups."""

    def work() -> subprocess.Popen[Any]:
        fds: list[int] = []
        join, cgroup_fds = _joiner(cgroup_files)
        try:
            for kind, _flag in _ENTER:
                fds.append(os.open(f"/proc/{init_pid}/ns/{kind}", os.O_RDONLY))
            libc.unshare(libc.CLONE_FS)  # a thread may change its mount namespace only with its own fs state
            for fd, (_kind, flag) in zip(fds, _ENTER):
                libc.setns(fd, flag)
            return subprocess.Popen(args, preexec_fn=join, **{**kwargs, "env": node_env(kwargs.get("env"))})
        finally:
            for fd in fds + cgroup_fds:
                os.close(fd)

    return in_thread(work)


def record_init(lab: str, node: str, pid: int) -> None:
    path = names.init_pid_path(lab, node)
    files.write(path, str(pid), 0o644, create=0o755, sync=False)


def init_pid(lab: str, node: str) -> int | None:
    """The PID of a container node's init, if it has one and it is alive."""
    try:
        with open(names.init_pid_path(lab, node)) as fh:
            pid = int(fh.read())
        os.stat(f"/proc/{pid}/ns/net")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def forget(lab: str, node: str) -> None:
    try:
        os.unlink(names.init_pid_path(lab, node))
    except FileNotFoundError:
        pass
