"""The locks nestlab waits on, which no other user can hold.

``flock`` needs no more than a descriptor, and any user who can open a file (even read-only) or a folder can take
it.  So every lock nestlab waits on is a file it made itself, ``0600``, in a folder of its own: by name in
:data:`~nestlab.names.LOCK_ROOT` (root's, 0700) with :func:`held`, or beside a lab's or a network's files with
:func:`lock_fd`.  A lock file someone else owns, or a link there, is refused, never waited on.  See docs/security.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator

from ... import names
from . import files


class Busy(OSError):
    """A lock still held by another process after the wait allowed."""


def lock_fd(path: str) -> int:
    """A descriptor of the lock file ``path``, which is ours: a regular file this user owns, readable by no one else,
    made so if missing.  Anything else there (a link, another user's file, or one an older nestlab made ``0644``,
    which another user may have open and locked already) is replaced by a new file first, never waited on."""
    for _ in range(8):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
        else:
            found = os.fstat(fd)
            if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o077:
                return fd
            os.close(fd)
        files.write(path, b"", 0o600, sync=False)  # renamed over it: whoever holds the old file holds nothing of ours
    raise OSError(errno.EPERM, f"lock {path} keeps being replaced by another user: refused", path)


def acquire(fd: int, wait: float | None = None, what: str = "lock") -> None:
    """``flock`` ``fd`` exclusively: blocking (``wait`` None), or polled for ``wait`` seconds, then :class:`Busy`."""
    if wait is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise Busy(errno.EWOULDBLOCK, f"{what} held by another process for {wait:g} s") from None
            time.sleep(0.02)


def root() -> str:
    """:data:`~nestlab.names.LOCK_ROOT`, made if missing (0700), checked to be this user's own folder."""
    files.make_dirs(os.path.dirname(names.LOCK_ROOT))
    with contextlib.suppress(FileExistsError):
        os.mkdir(names.LOCK_ROOT, 0o700)
    found = os.lstat(names.LOCK_ROOT)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        raise OSError(errno.EPERM, f"{names.LOCK_ROOT} is not this user's own folder: refused", names.LOCK_ROOT)
    if found.st_mode & 0o077:
        os.chmod(names.LOCK_ROOT, 0o700, follow_symlinks=False)
    return names.LOCK_ROOT


@contextlib.contextmanager
def held(name: str, wait: float | None = None) -> Iterator[None]:
    """Hold nestlab's lock ``name`` (a file in :func:`root`) for the block; ``wait``: as :func:`acquire`."""
    fd = lock_fd(os.path.join(root(), name))
    try:
        acquire(fd, wait, f"lock {name}")
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_held(path: str, wait: float | None = None) -> Iterator[None]:
    """Hold the lock file ``path`` (:func:`lock_fd`: ours, 0600) for the block; ``wait``: as :func:`acquire`."""
    fd = lock_fd(path)
    try:
        acquire(fd, wait, f"lock {path}")
        yield
    finally:
        os.close(fd)
