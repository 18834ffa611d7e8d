"""A command's stay in the user's namespaces (:func:`inside`): :func:`enter` before it runs (finding or starting the
holder), :func:`leave` after it, which ends the holder when the user has no lab left and no other command is inside.

Two locks in the user's folder keep the holder from going while a command joins it or works in it:
``holder.lock``, held while the holder is found, started, joined or ended, and ``inside.lock``, held shared by
every command inside for as long as it runs (the ending command needs it alone).
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .. import names
from ..errors import LabError
from . import holder
from .holder import Holder

OFF = "NESTLAB_ROOTLESS"  # "0": no rootless mode; commands that need root say so


@dataclass
class _Stay:
    home: str
    holder: Holder
    inside: int  # the shared lock's fd


_stay: _Stay | None = None
why_not: str | None = None  # why this command could not enter (rootless mode unavailable here), for its refusal


def inside(command: Callable[[], int]) -> int:
    """Run ``command`` in the user's namespaces (as it is, where this machine does not allow them); its exit code."""
    try:
        enter()
    except (LabError, OSError) as exc:  # the user's namespaces could not be entered
        print(f"error rootless mode: {exc}", file=sys.stderr)
        return 1
    try:
        return command()
    finally:
        leave()


def enter() -> None:
    """Run the rest of this (single-threaded) process as root in the user's namespaces; where this machine does not
    allow it, :data:`why_not` says why and the process stays as it was (a command then needs root, as before)."""
    global _stay, why_not
    if os.environ.get(OFF) == "0":
        why_not = f"{OFF}=0"
        return
    try:
        home = holder.folder()
    except holder.Unavailable as exc:
        why_not = str(exc)
        return
    gate = _lock(home, "holder.lock")
    try:
        found = holder.find(home)
        if found is None:
            try:
                found = holder.start(home)
            except holder.Unavailable as exc:
                why_not = str(exc)
                return
        shared = _lock(home, "inside.lock", fcntl.LOCK_SH)
        holder.join(found)
    finally:
        os.close(gate)
    _stay = _Stay(home, found, shared)


def leave() -> None:
    """After the command: end the holder if no lab of the user's is left and no other command is inside."""
    global _stay
    if _stay is None:
        return
    stay, _stay = _stay, None
    gate = _lock(stay.home, "holder.lock")
    try:
        os.close(stay.inside)
        try:
            os.close(_lock(stay.home, "inside.lock", fcntl.LOCK_EX | fcntl.LOCK_NB))
        except BlockingIOError:  # another command is inside
            return
        if not _anything_left():  # none can enter meanwhile: the gate is held
            holder.stop(stay.home, stay.holder)
    finally:
        os.close(gate)


def _anything_left() -> bool:
    """Whether the view still holds a lab's folder or a namespace (what a killed deploy left counts)."""
    return any(os.path.isdir(path) and os.listdir(path) for path in (names.STATE_ROOT, names.NETNS_DIR))


def _lock(home: str, name: str, how: int = fcntl.LOCK_EX) -> int:
    """An fd of ``home/name`` locked ``how`` (with ``LOCK_NB``, BlockingIOError when another holds it)."""
    fd = os.open(os.path.join(home, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
    except BaseException:
        os.close(fd)
        raise
    return fd
