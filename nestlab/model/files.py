"""Every file the model reads for a key (a bind's source, a startup-config, a trace, an env file, a visibility
graph, an image path), read here alone: bounded, regular files only, and, for a NestLab resource, from the
resource's own files and never the disk (:func:`only`).

A file on the disk is opened without blocking and refused unless it is a regular file (a device such as
/dev/zero, a FIFO, a socket would read without end or block); one over :data:`MAX_BYTES` is refused.  Inside
:func:`only` the disk is not looked at: a path the resource did not give is "no such file".
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar

MAX_BYTES = 64 * 1024 * 1024  # a file the model reads: a topology, a trace, an env file, a startup-config

_given: ContextVar[Mapping[str, bytes] | None] = ContextVar("nestlab_model_files", default=None)


class FileRefused(OSError):
    """Not read: not a regular file, over the size, or not one of the resource's files (``strerror`` says which)."""


@contextlib.contextmanager
def only(files: Mapping[str, bytes]) -> Iterator[None]:
    """Within this block (this thread's context) the model reads ``files`` (absolute path -> content) and no other."""
    token = _given.set(dict(files))
    try:
        yield
    finally:
        _given.reset(token)


def given() -> Mapping[str, bytes] | None:
    """The files :func:`only` gave, or None when the disk is read."""
    return _given.get()


def read_bytes(
    path: str | os.PathLike[str],
    limit: int = MAX_BYTES,
    stream: bool = False,
    *,
    dir_fd: int | None = None,
    follow: bool = True,
) -> bytes:
    """The file's content; :class:`FileRefused` (an OSError) for anything but a regular file of at most ``limit``
    bytes (with ``stream``, a pipe or socket too: a topology given on standard input, as a server's deploy reads it).
    ``dir_fd``: ``path`` is in that open folder (on the disk, whatever :func:`only` gave); without ``follow`` a
    symbolic link at ``path`` is refused, not followed (a file in a folder another user may write)."""
    return read_owned(path, limit, stream, dir_fd=dir_fd, follow=follow)[0]


def read_owned(
    path: str | os.PathLike[str],
    limit: int = MAX_BYTES,
    stream: bool = False,
    *,
    dir_fd: int | None = None,
    follow: bool = True,
) -> tuple[bytes, int | None]:
    """:func:`read_bytes` and the uid owning what was read, from the descriptor read (the very file whose bytes
    these are, whatever is at ``path`` since); None for a resource's own files (:func:`only`)."""
    files = _given.get()
    if files is not None and dir_fd is None:
        if os.fspath(path) not in files:
            raise FileRefused(errno.ENOENT, "not a file of the resource (a resource names no file of the operator's)")
        data = files[os.fspath(path)]
        if len(data) > limit:
            raise FileRefused(errno.EFBIG, f"larger than {limit} bytes")
        return data, None
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise FileRefused(errno.ELOOP, "a symbolic link (not followed: another user may have planted it)") from None
        raise
    try:
        found = os.fstat(fd)
        mode = found.st_mode
        if stream and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            os.set_blocking(fd, True)
        elif not stat.S_ISREG(mode):
            raise FileRefused(errno.EINVAL, f"not a regular file (a {_what(mode)})")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileRefused(errno.EFBIG, f"larger than {limit} bytes")
        return b"".join(chunks), found.st_uid
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = MAX_BYTES, *, dir_fd: int | None = None, follow: bool = True) -> str:
    """:func:`read_bytes` as UTF-8 (UnicodeDecodeError if it is not)."""
    return read_bytes(path, limit, dir_fd=dir_fd, follow=follow).decode("utf-8")


def exists(path: str | os.PathLike[str]) -> bool:
    files = _given.get()
    if files is not None:
        return os.fspath(path) in files
    return os.path.exists(path)


def is_file(path: str | os.PathLike[str]) -> bool:
    files = _given.get()
    if files is not None:
        return os.fspath(path) in files
    return os.path.isfile(path)


def walk(path: str) -> list[str]:
    """The file ``path`` itself, or every file under the folder ``path`` (sorted)."""
    if is_file(path) or _given.get() is not None:
        return [path] if is_file(path) else []
    return sorted(os.path.join(top, f) for top, _d, fs in os.walk(path) for f in fs)


def _what(mode: int) -> str:
    kinds: tuple[tuple[Callable[[int], bool], str], ...] = (
        (stat.S_ISDIR, "folder"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    )
    kinds += ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"))
    return next((name for test, name in kinds if test(mode)), "special file")
