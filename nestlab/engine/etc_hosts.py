"""A lab's names on this machine, and the record of them: the ``/etc/hosts`` block (containerlab's format,
under nestlab's own lock, and containerlab's when only root could hold it), ``/run/netns/LONG-NAME`` names, the ssh config, the SSH gate's pid and
the lab directory (``/run/nestlab/LAB/access.json``, written before any of them is made).  Written by
engine/access.py at deploy, removed here by destroy and cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator, Mapping

from .. import names
from ..backends.kernel import files, libc, locks, namespaces, procs
from ..errors import LabError

HOSTS = "/etc/hosts"
HOSTS_LOCK = "hosts.lock"  # nestlab's own, in names.LOCK_ROOT: no other user can hold it
CLAB_HOSTS_LOCK = "/run/lock/clab-hosts.lock"  # containerlab's, in a folder anyone may write (see _clab_lock)
CLAB_LOCK_WAIT = 1.0  # seconds root waits for containerlab's lock before going on without it


def _record(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "access.json")


def record(lab: str, made: Mapping[str, object]) -> None:
    files.write(_record(lab), json.dumps(made), 0o600, sync=False)


def withdraw(lab: str, folder_too: bool = False) -> tuple[list[str], DamagedHosts | None]:
    """Remove what engine/access.py's ``publish`` made: names, the SSH gate, the lab's keys (``folder_too``: the lab
    directory); returns the ``ip netns`` names, which pin the lab's namespaces too, for the caller to unpin with them,
    and a damaged /etc/hosts block left in place, for the caller to raise once the rest is gone."""
    try:
        with open(_record(lab)) as fh:
            made = json.load(fh)
    except (FileNotFoundError, ValueError):
        made = None
    stop_gate(lab)
    pins = [os.path.join(names.NETNS_DIR, long) for long in (made or {}).get("netns", [])]
    if made:
        if made.get("ssh_config"):  # none for a lab on servers or pods
            files.unlink(made["ssh_config"])
        if made.get("ssh_key"):  # rootless: the lab's key, where the user's ssh reads it
            files.unlink(made["ssh_key"])
        if folder_too:  # beside the topology, in a folder its owner may swap for a link: reached through none
            files.remove_tree(made["folder"])
    files.remove_tree(names.lab_keys(lab))  # its folder stays, as /run/nestlab-mgmt does (a mount point)
    try:
        block(lab, [])
        damaged = None
    except DamagedHosts as exc:
        damaged = exc
    return [path for path in pins if os.path.exists(path)], damaged


def unpin_gone(lab: str, kept: set[str]) -> None:
    """Unpin the ``ip netns`` names an earlier deploy gave nodes that are no longer in ``kept`` (long names)."""
    try:
        with open(_record(lab)) as fh:
            before = json.load(fh).get("netns", [])
    except (FileNotFoundError, ValueError, AttributeError):
        return
    for long in set(before) - kept:
        with contextlib.suppress(FileNotFoundError, OSError):
            namespaces.unpin(os.path.join(names.NETNS_DIR, long))


def stop_gate(lab: str) -> None:
    try:
        with open(_record(lab)) as fh:
            pid = json.load(fh).get("gate")
    except (FileNotFoundError, ValueError, AttributeError):
        return
    if isinstance(pid, int) and names.lab_dir(lab).encode() in procs.cmdline(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 15)


def alias(target: str, path: str) -> None:
    """``path`` pins the same network namespace as ``target`` (what ``ip netns`` lists)."""
    with contextlib.suppress(FileNotFoundError):
        namespaces.unpin(path)
    os.close(os.open(path, os.O_CREAT | os.O_RDONLY, 0o444))
    libc.mount(target, path, libc.MS_BIND)


class DamagedHosts(LabError):
    """The lab's block of the hosts file has a START line without its END: left as it is."""


def block(lab: str, lines: list[str], path: str = HOSTS) -> None:
    """Replace the lab's block of the hosts file (``path``) by ``lines`` (none: remove it), under nestlab's lock
    (and containerlab's, :func:`_clab_lock`).  Only what lies between a START line and its END goes; a START whose
    END never comes (another START or the end of the file first) is a :class:`DamagedHosts` error naming its line,
    and the file is unchanged."""
    start, end = f"###### CLAB-{lab}-START ######", f"###### CLAB-{lab}-END ######"
    with locks.held(HOSTS_LOCK), _clab_lock():
        try:
            with open(path) as fh:
                text = fh.read()
        except FileNotFoundError:
            text = "127.0.0.1\tlocalhost\n"
        old = text.splitlines()
        kept: list[str] = []
        at = 0
        while at < len(old):
            if old[at] == start:
                closing = next((i for i in range(at + 1, len(old)) if old[i] in (start, end)), None)
                if closing is None or old[closing] != end:
                    raise DamagedHosts(
                        f"{path}:{at + 1}: {start} has no {end} after it: nothing of {path} was changed "
                        "(remove the lab's lines there by hand)"
                    )
                at = closing + 1
                continue
            kept.append(old[at])
            at += 1
        if lines:
            kept += [start, *lines, end]
        new = "\n".join(kept) + "\n"
        if new != text:
            files.in_place(path, new)  # in place: /etc/hosts may be a bind mount (containers, VMs)


@contextlib.contextmanager
def _clab_lock() -> Iterator[None]:
    """containerlab's lock of /etc/hosts too, where sharing it is safe: an existing regular file (never made here,
    never through a link) that root owns, waited on :data:`CLAB_LOCK_WAIT` seconds at most.  Any user who can open
    it may ``flock`` it (a lock file anyone can read, anyone can hold), so a holder only delays root that long, and
    then nestlab's own lock alone guards the edit (docs/security.md: the trade-off with containerlab)."""
    try:
        fd = os.open(CLAB_HOSTS_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # none (no containerlab ran), a link, or refused: nestlab's lock alone
        yield
        return
    try:
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode) and found.st_uid == 0:
            with contextlib.suppress(locks.Busy, OSError):
                locks.acquire(fd, CLAB_LOCK_WAIT, CLAB_HOSTS_LOCK)
        yield
    finally:
        os.close(fd)
