"""A node's own filesystem view: a mount namespace in which /run, /var/run and /tmp are fresh
tmpfs and chosen folders (``binds``) are the node's own, over the machine's filesystem.

Two FRR routers on one machine both want /etc/frr and /run/frr: in their views each sees its own.
The view is made from a short-lived thread (a thread may change its mount namespace only with
its own filesystem state), pinned on a file under ``/run/nestlab/LAB/mnt/`` (a private mount,
so nothing propagates back), and entered the same way by ``exec``, ``cmd``, ``shell`` and bench tools.

A view may also have a root of its own (``own_root``, or a bind whose destination the machine lacks
outside /run and /tmp, such as containerlab's ``file:/file.txt``): the machine's root filesystem
under an overlay whose upper layer is a tmpfs, with the machine's other mounts (/proc, /sys, /dev,
...) bound in.  What the node writes there, and the paths its binds add, stay in the node.
"""

from __future__ import annotations

import errno
import functools
import os
import pwd
import stat
from collections.abc import Callable, Sequence

from ...names import HIDDEN
from . import containers, files, libc, mounts, namespaces

FRESH = ("/run", "/tmp")  # tmpfs in every view (/var/run is a link to /run on Debian)
Bind = tuple[str, str, bool]  # (source on the machine, destination in the view, read-only)


def prepare(path: str) -> None:
    """Make the folder views are pinned in a private mount of its own (a mount namespace may only
    be pinned where no propagation could carry it into itself); once per deploy."""
    os.makedirs(path, exist_ok=True)
    if path not in mounts.points():
        libc.mount(path, path, libc.MS_BIND)
    libc.mount("", path, libc.MS_PRIVATE, "none")


def needs_own_root(binds: Sequence[Bind]) -> bool:
    """A bind adds a path the view would lack outside the fresh /run and /tmp: one the machine lacks, or, below an
    earlier bind's folder, one that folder's source lacks (it is what the view shows there; a router's file bound
    into its own /etc/frr is looked for in that folder, not in the machine's, which may not be readable)."""
    fresh = tuple(f + "/" for f in FRESH)
    return any(not _present(target, binds[:i]) and not target.startswith(fresh) for i, (_, target, _) in enumerate(binds))


def _present(target: str, earlier: Sequence[Bind]) -> bool:
    for source, folder, _read_only in reversed(earlier):
        if target.startswith(folder.rstrip("/") + "/"):
            return os.path.lexists(source + target[len(folder.rstrip("/")) :])
    return os.path.lexists(target)


def _mount_point(target: str, is_dir: bool) -> int:
    """An O_PATH descriptor of ``target``, made if missing (a folder, or an empty file), reached through no link
    another user could have planted (files.open_dir): a bind's target may lie in a folder a node's daemon writes."""
    with files.folder(os.path.dirname(target), create=0o755) as parent:
        name = os.path.basename(target)
        try:
            point = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except FileNotFoundError:  # under a fresh tmpfs, or in the view's own root
            if is_dir:
                os.mkdir(name, 0o755, dir_fd=parent)
            else:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent))
            point = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        if not stat.S_ISLNK(os.fstat(point).st_mode):
            return point
        os.close(point)
        if not files.trusted_link(parent, name):
            raise OSError(errno.ELOOP, "a symbolic link another user could have planted is not followed", target)
        return os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=parent)  # root's own link (/etc/resolv.conf)


def create(
    pin: str, net_path: str, uts_path: str, binds: Sequence[Bind], owners: dict[str, tuple[int, int]], own_root: bool = False
) -> None:
    """Make a node's view and pin it at ``pin``.  ``owners``: folders to create in the fresh /run or
    /tmp with their (uid, gid), e.g. ``{"/run/frr": (frr, frr)}``.  Call :func:`prepare` on the pin's folder first."""
    own_root = own_root or needs_own_root(binds)

    def build() -> int:
        namespaces.join(net_path, uts_path)
        libc.unshare(libc.CLONE_NEWNS)
        libc.mount("", "/", libc.MS_REC | libc.MS_PRIVATE, "none")  # nothing mounted here leaks out
        # Sources are held open first: they may lie under /run, which the view covers.
        held = [
            (os.open(source, os.O_PATH | os.O_CLOEXEC), os.path.isdir(source), target, read_only)
            for source, target, read_only in binds
        ]
        hidden = [] if own_root else [os.open(path, os.O_PATH | os.O_CLOEXEC) for path in HIDDEN if os.path.isdir(path)]
        try:
            if own_root:
                _overlay_root()
            for path in FRESH:
                libc.mount("nestlab", path, 0, "tmpfs", "mode=0755" if path == "/run" else "mode=1777")
            for path, (uid, gid) in owners.items():
                os.makedirs(path, exist_ok=True)
                os.chown(path, uid, gid)
            for fd, is_dir, target, read_only in held:
                point = _mount_point(target, is_dir)  # through no link a node's daemon planted in an earlier bind
                try:
                    libc.mount(f"/proc/self/fd/{fd}", f"/proc/self/fd/{point}", libc.MS_BIND | libc.MS_REC)
                finally:
                    os.close(point)
                if read_only:
                    libc.mount("", target, libc.MS_BIND | libc.MS_REMOUNT | libc.MS_RDONLY, "none")
            for fd in hidden:  # under the fresh /run, but the copy would still hold every namespace pinned there
                libc.umount(f"/proc/self/fd/{fd}")
        finally:
            for fd in [h[0] for h in held] + hidden:
                os.close(fd)
        return os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)

    files.touch(pin)
    try:
        _pin(build, pin)
    except BaseException:
        os.unlink(pin)
        raise


def _pin(build: Callable[[], int], pin: str) -> None:
    """Make the view (``build`` returns its fd) and bind it on ``pin``.

    The kernel pins a mount namespace only in one made before it, which it tells by their ids; newer kernels hand
    ids out in batches per CPU, so a view made on another CPU than the namespace pinning it may look older (EINVAL).
    Only a namespace of a user's own (rootless mode) is not the machine's first: there the view is made again on
    each CPU in turn, one of which (the pinning namespace's) hands out younger ids."""
    cpus: list[int | None] = [None, *sorted(os.sched_getaffinity(0))]
    for cpu in cpus:
        fd = containers.in_thread(functools.partial(_on_cpu, cpu, build))
        try:
            libc.mount(f"/proc/self/fd/{fd}", pin, libc.MS_BIND)
            return
        except OSError as exc:
            if exc.errno != errno.EINVAL or cpu == cpus[-1]:
                raise
        finally:
            os.close(fd)


def _on_cpu(cpu: int | None, work: Callable[[], int]) -> int:
    """``work()`` in the calling (short-lived) thread, kept on ``cpu`` when one is given."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    return work()


def _overlay_root() -> None:
    """Make the calling thread's (new, private) mount namespace's root the machine's root under a
    tmpfs-backed overlay, every other mount of the machine but /run and /tmp (fresh in any view) bound in."""
    table = mounts.table()
    root_id = [m.id for m in table if m.point == "/"][-1]  # the topmost mount on /
    fresh = tuple(f + "/" for f in FRESH)  # covered by the view's own /run and /tmp
    tops = sorted(
        {
            m.point
            for m in table
            if m.parent == root_id and m.point != "/" and m.point not in FRESH and not m.point.startswith(fresh)
        }
    )
    stage = "/tmp"  # covered by a fresh tmpfs in the view anyway
    libc.mount("nestlab", stage, 0, "tmpfs", "mode=0700")
    for part in ("upper", "work", "root"):
        os.mkdir(f"{stage}/{part}")
    libc.mount("overlay", f"{stage}/root", 0, "overlay", f"lowerdir=/,upperdir={stage}/upper,workdir={stage}/work")
    for path in tops:
        target = f"{stage}/root{path}"
        if os.path.isdir(target) or os.path.isfile(target):
            libc.mount(path, target, libc.MS_BIND | libc.MS_REC)
    # The overlay moved over / and the thread's root set to it (as switch_root does), not pivot_root: a container
    # runtime's default seccomp profile refuses pivot_root (EPERM, in a lab pod), and setns into the view finds the
    # root stacked topmost on / all the same.  The machine's root stays beneath, out of reach by any path.
    os.chdir(f"{stage}/root")
    libc.mount(".", "/", libc.MS_MOVE)
    os.chroot(".")
    os.chdir("/")


def owner(user: str) -> tuple[int, int]:
    """A user's (uid, gid), for a folder made in a view."""
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
