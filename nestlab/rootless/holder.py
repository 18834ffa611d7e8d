"""The holder: one small process per user, owner of the user namespace the user's labs live in and of its view.

The first ``nestlab`` command that needs it starts it: a child unshares a user, a mount, a network and a UTS
namespace (the user is root in them: mapped with the user's subordinate ids by ``newuidmap``/``newgidmap`` where
/etc/subuid and /etc/subgid give some, else mapped alone, with no helper), lays out the view (view.py), says its
namespaces through a pipe and becomes ``nestlab-holder``, a sleeping process.  Its network and UTS namespaces
stand for the machine's to the commands inside: nestlab's threads return to them from a node's, which a user
namespace may not do to the machine's own.  Its pidfile, in the user's folder, gives its pid and its namespaces'
inodes, so that a later command checks it is the one started before joining it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import select
import shutil
import signal
import subprocess
from dataclasses import dataclass

from ..backends.kernel import detached, files, libc, netlink, procs, userns
from ..errors import LabError
from . import view

PIDFILE = "holder.pid"
UPLINK = "tap0"  # the holder's way out (slirp4netns), where the machine has it
NAME = "nestlab-holder"  # how the holder shows in ps


class Unavailable(LabError):
    """This machine does not let an ordinary user make the holder's namespaces."""


@dataclass(frozen=True)
class Holder:
    pid: int
    inodes: tuple[int, ...]  # of its namespaces, in the order of NAMESPACES


# Joined in this order: the user namespace first, which gives the rights to join the others.
NAMESPACES = (("user", libc.CLONE_NEWUSER), ("mnt", libc.CLONE_NEWNS), ("net", libc.CLONE_NEWNET), ("uts", libc.CLONE_NEWUTS))


def folder() -> str:
    """The user's own folder for the pidfile, the locks and the view's files: ``~/.local/state/nestlab`` (the same
    from a login, ``su``, cron or an IDE, and kept past the last logout, unlike ``$XDG_RUNTIME_DIR``); made 0700,
    :class:`Unavailable` if others could write it."""
    path = os.path.join(os.path.expanduser("~"), ".local", "state", "nestlab")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Unavailable(f"it needs a folder of yours: cannot make {path} ({exc.strerror}); set HOME") from None
    if not _mine(path):
        raise Unavailable(f"{path}, where it keeps its holder, is not yours alone (its owner or mode)")
    return path


def _mine(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def find(home: str) -> Holder | None:
    """The holder the pidfile in ``home`` names, if it still runs as this user with the namespaces recorded."""
    try:
        with open(os.path.join(home, PIDFILE)) as fh:
            pid, *inodes = (int(word) for word in fh.read().split())
    except (OSError, ValueError):
        return None
    if procs.uids(pid) != (os.getuid(), os.getuid()) or _inodes(pid) != tuple(inodes):
        return None
    return Holder(pid, tuple(inodes))


def _inodes(pid: int) -> tuple[int | None, ...]:
    return tuple(procs.namespace(pid, ns) for ns, _flag in NAMESPACES)


def join(holder: Holder) -> None:
    """Move this (single-threaded) process into the holder's namespaces, in the folder it was in."""
    here = os.getcwd()
    fds = [os.open(f"/proc/{holder.pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC) for ns, _flag in NAMESPACES]
    try:
        if tuple(os.fstat(fd).st_ino for fd in fds) != holder.inodes:
            raise LabError(f"the holder (pid {holder.pid}) went away while joining it; run the command again")
        for fd, (_ns, flag) in zip(fds, NAMESPACES):
            libc.setns(fd, flag)
    finally:
        for fd in fds:
            os.close(fd)
    with contextlib.suppress(OSError):  # a folder the view covers: stay at its root
        os.chdir(here)


def start(home: str) -> Holder:
    """Start the holder (call under the user's lock) and record it in ``home``'s pidfile."""
    sleep = shutil.which("sleep")
    if sleep is None:
        raise LabError("rootless mode needs sleep (coreutils) on the PATH: its holder process is one")
    read, write = os.pipe()
    unshared, mapped = os.pipe(), os.pipe()  # the holder says it has its namespace; the middle says how it mapped it
    lifeline = os.pipe()  # the holder holds its write end for as long as it lives: the uplink ends with it
    middle = os.fork()
    if middle == 0:  # forks the holder, maps its user namespace and leaves: the holder is nobody's child but init's
        os.close(read)
        try:
            os.setsid()
            pid = os.fork()
            if pid == 0:
                for fd in (unshared[0], mapped[1], lifeline[0]):
                    os.close(fd)
                _hold(write, home, sleep, unshared[1], mapped[0], lifeline[1])
            for fd in (write, unshared[1], mapped[0], *lifeline):  # a holder that fails early ends every read here
                os.close(fd)
            if os.read(unshared[0], 1) == b"u":
                os.write(mapped[1], _map(pid))
        finally:
            os._exit(0)
    for fd in (write, *unshared, *mapped, lifeline[1]):
        os.close(fd)
    with os.fdopen(read, "rb") as fh:
        said = fh.read().decode()
    os.waitpid(middle, 0)
    word, _, rest = said.partition(" ")
    if word != "ok":
        os.close(lifeline[0])
        raise Unavailable(rest or "the holder process died before it said anything")
    pid, *inodes = (int(x) for x in rest.split())
    _uplink(pid, lifeline[0])
    files.write(os.path.join(home, PIDFILE), f"{pid} {' '.join(map(str, inodes))}\n", 0o600, sync=False)
    return Holder(pid, tuple(inodes))


def _map(pid: int) -> bytes:
    """Map the holder's user namespace from outside it with the user's subordinate ids too (``newuidmap`` and
    ``newgidmap``, when /etc/subuid and /etc/subgid give the user ranges): ``b"s"``; else ``b"-"``, and the holder
    maps the user alone.  What the tools say when they refuse comes back as the error."""
    uid, gid = os.getuid(), os.getgid()
    try:
        name: str | None = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    uids, gids = userns.subordinate(userns.SUBUID, uid, name), userns.subordinate(userns.SUBGID, uid, name)
    newuidmap, newgidmap = shutil.which("newuidmap"), shutil.which("newgidmap")
    if not (uids and gids and newuidmap and newgidmap):
        return b"-"
    for tool, own, (first, count) in ((newuidmap, uid, uids), (newgidmap, gid, gids)):
        try:
            done = subprocess.run(
                [tool, str(pid), "0", str(own), "1", "1", str(first), str(count)], capture_output=True, text=True
            )
        except OSError as exc:
            done = subprocess.CompletedProcess([], 1, "", str(exc))
        if done.returncode and tool == newuidmap:  # nothing is mapped yet: the holder maps the user alone
            return b"-"
        if done.returncode:
            return f"!{os.path.basename(tool)}: {done.stderr.strip() or done.returncode}".encode()
    return b"s"


def _uplink(pid: int, lifeline: int) -> None:
    """Give the holder's network a way out, where the machine has slirp4netns (user-mode NAT, as rootless Podman's):
    :data:`UPLINK` with 10.0.2.100/24 and the default route, the machine's own loopback out of reach.  It runs as
    the user, outside the namespaces, and ends when the holder does (``lifeline``'s other end closes)."""
    tool = shutil.which("slirp4netns")
    if tool is None:
        os.close(lifeline)
        return
    ready, told = os.pipe()
    args = ["--configure", "--mtu=65520", "--disable-host-loopback", f"--exit-fd={lifeline}", f"--ready-fd={told}"]
    try:
        proc = subprocess.Popen([tool, *args, str(pid), UPLINK], **detached.options(pass_fds=(lifeline, told)))
    finally:
        os.close(lifeline)
        os.close(told)
    with os.fdopen(ready, "rb") as fh:
        if not select.select([fh], [], [], 5)[0] or fh.read(1) != b"1":
            proc.kill()  # the labs work without it, reaching no further than the user's namespace
    proc.returncode = 0  # it outlives this command, a child of init's: not to be waited for here


def _hold(write: int, home: str, sleep: str, unshared: int, mapped: int, lifeline: int) -> None:
    """The holder itself: make the namespaces (mapped from outside through ``unshared``/``mapped``, or by itself)
    and the view, say so on ``write``, then sleep until told to go, holding ``lifeline`` open."""
    uid, gid = os.getuid(), os.getgid()
    try:
        try:
            libc.unshare(libc.CLONE_NEWUSER | libc.CLONE_NEWNS | libc.CLONE_NEWNET | libc.CLONE_NEWUTS)
        except (OSError, LabError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise LabError(f"this machine refuses you a user namespace ({why}): `nestlab doctor` says why") from None
        os.write(unshared, b"u")
        how = os.read(mapped, 4096)
        if how.startswith(b"!"):
            raise LabError(f"mapping your subordinate ids failed: {how[1:].decode()}")
        if how != b"s":
            userns.map_self(uid, gid)
        view.make(home)
        netlink.Netlink().run(netlink.set_up("lo"))
        inodes = " ".join(map(str, _inodes(os.getpid())))
    except Exception as exc:  # said to the command that started it
        os.write(write, f"error {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}".encode())
        os._exit(1)
    os.write(write, f"ok {os.getpid()} {inodes}".encode())
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.dup2(lifeline, 3, inheritable=True)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # nothing of its caller's stays open for as long as it lives
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(sleep, [NAME, "infinity"])


def stop(home: str, holder: Holder) -> None:
    """End the holder and forget it (its namespaces go with the last process in them)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(holder.pid, signal.SIGTERM)
    for name in (PIDFILE, "hosts", "shadow"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(home, name))
