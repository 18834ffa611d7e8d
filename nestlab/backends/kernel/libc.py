"""The few libc calls Python 3.11 lacks: unshare, setns, mount, umount2, prctl, sethostname; and the
process's open-file limit raised as far as it may go."""

from __future__ import annotations

import ctypes
import errno
import os
import resource

from ...errors import LabError

CLONE_FS = 0x00000200
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MS_SHARED = 1 << 20
MNT_DETACH = 2
PR_SET_DUMPABLE = 4

_libc = ctypes.CDLL(None, use_errno=True)


def most_files() -> int:
    """Raise this process's soft limit on open files to its hard limit (where allowed); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):  # a hard limit above what the kernel allows a process (fs.nr_open)
        return soft
    return hard


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """unshare(2); the kernel's per-user limit on namespaces (ENOSPC) is a LabError naming the limit."""
    ret = _libc.unshare(flags)
    if ret == 0 or ctypes.get_errno() != errno.ENOSPC:
        return _check(ret, "unshare")
    limits = []
    for flag, kind in (
        (CLONE_NEWUSER, "user"),
        (CLONE_NEWNET, "net"),
        (CLONE_NEWUTS, "uts"),
        (CLONE_NEWNS, "mnt"),
        (CLONE_NEWPID, "pid"),
        (CLONE_NEWIPC, "ipc"),
    ):
        if flags & flag:
            with open(f"/proc/sys/user/max_{kind}_namespaces") as fh:
                limits.append(f"user.max_{kind}_namespaces = {fh.read().strip()}")
    raise LabError(
        f"the kernel's limit on namespaces is reached ({', '.join(limits)}): raise it with "
        f"`sysctl -w {limits[0].split(' = ')[0]}=N` or deploy fewer nodes"
    )


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(source: str, target: str, flags: int, fstype: str | None = None, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
        ),
        f"mount {target}",
    )


def umount(target: str) -> None:
    """Lazily detach ``target``; a path that is not mounted is not an error."""
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL: not a mount point, ENOENT: gone
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def dumpable() -> None:
    """Make this process dumpable again once it changed its user, so that its /proc/self files are its own."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), "sethostname")
