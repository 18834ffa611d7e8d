"""Files root makes, writes and removes where another user may write, through no link that user could plant.

* :func:`open_dir` walks a path from ``/`` one component at a time, held by directory descriptors (openat2's
  ``RESOLVE_NO_SYMLINKS`` in one call where the kernel has it).  A symbolic link on the way is followed only when
  no one but root (or this process's own user) could have put it there: the link and the folder holding it are
  theirs, and that folder is writable by no one else (or sticky).  Any other link is refused (ELOOP), so a folder
  swapped for a link after its path was read leads nowhere.
* :func:`write` / :func:`write_at` write a file whole: a new temporary file (O_EXCL|O_NOFOLLOW, never an existing
  file nor a link's target), its mode and owner set on the descriptor, fsync'd, then renamed over the name, which
  replaces a link planted there and never writes through it.
* :func:`remove_tree` removes a folder by descriptors from a parent reached by :func:`open_dir` (Python's own
  fd-based rmtree below it), never following a link, at the top or below.
* :func:`in_place` rewrites what cannot be replaced (a kernel's control file, a file another mount owns);
  :func:`append`, :func:`output` and :func:`touch` add to a record, take a process's output and make an empty
  file, never through a link at the name.  Nothing else in nestlab opens a file to write (a test checks it).

See docs/security.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from typing import BinaryIO

SYS_OPENAT2 = 437  # the same number on every architecture (the syscall table is shared from 424 on)
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x01, 0x02, 0x04, 0x08
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_libc = ctypes.CDLL(None, use_errno=True)
_have_openat2 = True


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(dir_fd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int | None:
    """openat2(2); None where the kernel (or a seccomp filter) has no openat2: the caller walks instead."""
    global _have_openat2
    if not _have_openat2:
        return None
    how = _OpenHow(flags, mode, resolve)
    fd = _libc.syscall(SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) or (err == errno.EINVAL and not path):
        _have_openat2 = False
        return None
    if err == errno.EAGAIN:  # a rename elsewhere raced the lookup: the walk decides
        return None
    raise OSError(err, os.strerror(err), path)


def _mine() -> set[int]:
    """Owners whose links and folders are trusted: root and this process's user.  Never the overflow uid: in a user
    namespace every user it does not map shows as that uid (the machine's root and every stranger alike), so a link
    owned by it may be anyone's."""
    return {0, os.geteuid()}


def _trusted_link(folder: os.stat_result, link: os.stat_result, mine: set[int]) -> bool:
    """Whether a link could only have been put there by root or by us: both ours, and the folder writable by no
    one else (or sticky: no one else may replace an entry of ours there)."""
    others_write = folder.st_mode & 0o022 and not folder.st_mode & stat.S_ISVTX
    return link.st_uid in mine and folder.st_uid in mine and not others_write


def trusted_link(dir_fd: int, name: str) -> bool:
    """Whether the link ``name`` in the open folder ``dir_fd`` could only have been put there by root or by us."""
    return _trusted_link(os.fstat(dir_fd), os.lstat(name, dir_fd=dir_fd), _mine())


def open_dir(path: str | os.PathLike[str], create: int | None = None, beneath: int | None = None) -> int:
    """A descriptor (O_RDONLY|O_DIRECTORY) of the folder ``path``, reached one component at a time with no
    untrusted link followed (see the module); ``create``: the mode to make it with if missing (missing parents:
    0755).  ``beneath``: a
    folder's descriptor that the relative ``path`` stays under, following no link at all (openat2's
    RESOLVE_BENEATH).  An OSError (ELOOP for a link) when a component is a link another could have planted."""
    path = os.fspath(path)
    if beneath is None and not os.path.isabs(path):
        path = os.path.abspath(path)
    start = beneath if beneath is not None else None
    relative = path.lstrip("/") if beneath is None else path
    if create is None or beneath is not None:
        resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (RESOLVE_BENEATH if beneath is not None else 0)
        root = os.open("/", _DIR) if start is None else start
        try:
            with contextlib.suppress(OSError):
                fd = openat2(root, relative or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, resolve)
                if fd is not None:
                    return fd
        finally:
            if start is None:
                os.close(root)
    held = _walk(relative, create, beneath)
    try:
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=held)
    finally:
        os.close(held)


def _walk(path: str, create: int | None, beneath: int | None) -> int:
    """The O_PATH descriptor of folder ``path`` (relative to ``/`` or to ``beneath``), walked component by component."""
    stack = [os.open("/" if beneath is None else ".", _DIR, dir_fd=beneath)]
    todo = [p for p in path.split("/") if p not in ("", ".")]
    mine, hops = _mine(), 0
    try:
        while todo:
            part = todo.pop(0)
            if part == "..":
                _up(stack, beneath is not None, path)
                continue
            fd = _step(part, stack[-1], create, last=not todo)
            if fd is None:  # made just now: opened on the next turn
                todo.insert(0, part)
                continue
            found = os.fstat(fd)
            if stat.S_ISLNK(found.st_mode):
                os.close(fd)
                hops += 1
                if beneath is not None or hops > 40 or not _trusted_link(os.fstat(stack[-1]), found, mine):
                    raise OSError(errno.ELOOP, "a symbolic link another user could have planted is not followed", path)
                todo[:0] = _followed(part, stack)
                continue
            if not stat.S_ISDIR(found.st_mode):
                os.close(fd)
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            stack.append(fd)
        return stack.pop()
    finally:
        for fd in stack:
            os.close(fd)


def _up(stack: list[int], beneath: bool, path: str) -> None:
    """``..``: back to the folder above, never above the one the walk must stay under."""
    if beneath and len(stack) == 1:
        raise OSError(errno.EXDEV, "the path leaves the folder it must stay under", path)
    if len(stack) > 1:
        os.close(stack.pop())


def _step(part: str, dir_fd: int, create: int | None, last: bool) -> int | None:
    """``part`` of the open folder ``dir_fd`` (O_PATH, no link followed); None when it was missing and is made now
    (with ``create``: the last component with that mode, the parents 0755)."""
    try:
        return os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        if create is None:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, create if last else 0o755, dir_fd=dir_fd)
        return None


def _followed(part: str, stack: list[int]) -> list[str]:
    """The components of the trusted link ``part`` (no one else can change it) to walk instead; an absolute one
    starts again from ``/``."""
    target = os.readlink(part, dir_fd=stack[-1])
    if target.startswith("/"):
        while stack:
            os.close(stack.pop())
        stack.append(os.open("/", _DIR))
    return [p for p in target.split("/") if p not in ("", ".")]


@contextlib.contextmanager
def folder(path: str | os.PathLike[str], create: int | None = None) -> Iterator[int]:
    """:func:`open_dir` for a ``with`` block."""
    fd = open_dir(path, create)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(
    dir_fd: int, name: str, mode: int = 0o600, owner: tuple[int, int] | None = None, sync: bool = True
) -> Iterator[BinaryIO]:
    """A new file to write for the block, put in place of ``name`` in the open folder ``dir_fd`` when the block ends
    well (nothing changes if it raises): a temporary file made anew (never an existing file, nor a link's target),
    ``mode`` and ``owner`` (uid, gid) set on its descriptor whatever the umask, fsync'd (``sync``), renamed over
    ``name`` (a link planted there is replaced, not followed)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"  # as secrets.token_hex, without its imports (hashlib, random)
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:  # someone planted that name: another one
            continue
    try:
        with open(fd, "wb") as fh:
            os.fchmod(fd, mode)
            if owner is not None:
                os.fchown(fd, *owner)
            yield fh
            fh.flush()
            if sync:
                os.fsync(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_at(
    dir_fd: int, name: str, data: bytes | str, mode: int = 0o600, owner: tuple[int, int] | None = None, sync: bool = True
) -> None:
    """``name`` in the open folder ``dir_fd`` replaced whole by ``data`` (:func:`replacing`)."""
    with replacing(dir_fd, name, mode, owner, sync) as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def created(path: str | os.PathLike[str], mode: int = 0o644) -> Iterator[BinaryIO]:
    """:func:`replacing` by path (a file root writes where the user asked, e.g. ``capture -w``): its folder reached
    through no untrusted link, the file owned by whoever owns that folder."""
    path = os.path.abspath(os.fspath(path))
    with folder(os.path.dirname(path)) as fd, replacing(fd, os.path.basename(path), mode, owner_of(fd), False) as fh:
        yield fh


def write(
    path: str | os.PathLike[str],
    data: bytes | str,
    mode: int = 0o600,
    owner: tuple[int, int] | None = None,
    create: int | None = None,
    sync: bool = True,
) -> None:
    """:func:`write_at` by path: its folder reached by :func:`open_dir` (``create``: made with that mode)."""
    path = os.fspath(path)
    with folder(os.path.dirname(os.path.abspath(path)), create) as fd:
        write_at(fd, os.path.basename(path), data, mode, owner, sync)


def owner_of(dir_fd: int) -> tuple[int, int]:
    """The uid and gid owning an open folder (files written for its owner)."""
    found = os.fstat(dir_fd)
    return found.st_uid, found.st_gid


def make_dirs(path: str | os.PathLike[str], mode: int = 0o755) -> None:
    """``os.makedirs(path, exist_ok=True)`` through no untrusted link (:func:`open_dir`)."""
    os.close(open_dir(path, create=mode))


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove the folder ``path`` and all below it if it is there, by descriptors from its parent (reached by
    :func:`open_dir`): a link at ``path`` or on the way to it is not followed (nothing is removed), nor any below."""
    path = os.path.abspath(os.fspath(path))
    try:
        parent = open_dir(os.path.dirname(path))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return
        raise
    try:
        name = os.path.basename(path)
        try:
            found = os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(found.st_mode):
            shutil.rmtree(name, dir_fd=parent, ignore_errors=True)
    finally:
        os.close(parent)


def unlink(path: str | os.PathLike[str]) -> None:
    """Remove the file (or link) ``path`` if it is there, reached through no untrusted link."""
    path = os.path.abspath(os.fspath(path))
    try:
        with folder(os.path.dirname(path)) as fd:
            os.unlink(os.path.basename(path), dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        pass


_NEW = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC  # a file of ours: made if missing, never through a link


def _written(fd: int, data: bytes | str) -> None:
    view = memoryview(data.encode() if isinstance(data, str) else data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def in_place(path: str | os.PathLike[str], data: bytes | str) -> None:
    """``path`` truncated and written where it is (as a shell's ``>``), not replaced: a kernel's control file
    (/proc/sys, a cgroup's, a user namespace's id map: short data goes in one write(2)) or a file another mount
    owns (/etc/hosts bound into a container).  The kernel's own errors (OSError) reach the caller."""
    _written(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644), data)


def append(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o644) -> None:
    """``data`` added at the end of the record ``path`` (made with ``mode`` if missing)."""
    _written(os.open(path, _NEW | os.O_APPEND, mode), data)


def output(path: str | os.PathLike[str], mode: int = 0o644) -> BinaryIO:
    """``path`` emptied (made with ``mode`` if missing) for a process's output to go to: its file, to close."""
    return open(os.open(path, _NEW | os.O_TRUNC, mode), "wb")


def touch(path: str | os.PathLike[str], mode: int = 0o644) -> None:
    """``path`` made empty if missing (what a mount is bound over), left as it is if there."""
    os.close(os.open(path, _NEW, mode))
