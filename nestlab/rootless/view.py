"""The user's view of the machine: the holder's mount namespace, in which nestlab's paths are the user's own.

``/run`` and ``/var/lib`` are each covered by a tmpfs in which every entry of the machine's folder is a link to it
(the folder stays reachable under ``.nestlab-system``), except nestlab's own (``/run/netns``, ``/run/nestlab*``,
``/run/lock``, ``/var/lib/nestlab``): those are made afresh in the tmpfs, the user's, when nestlab first writes
there.  ``/etc/hosts`` is a copy of the machine's, kept in the user's folder (``hosts``), bound over the original;
``/etc/shadow``, which the user may not read, is a file of the user's naming root alone, with no password (sshd
takes a root whose entry it cannot read as locked, and nodes answer SSH with the lab's key).
Nothing here propagates back to the machine; it all goes when the holder does.
"""

from __future__ import annotations

import fnmatch
import os

from ..backends.kernel import files, libc, userns

SYSTEM = ".nestlab-system"  # where, in a covered folder, the machine's own stays reachable
COVERED = {"/run": ("netns", "lock", "nestlab*", "sshd"), "/var/lib": ("nestlab",)}  # folder: what is made afresh in it
HOSTS = "/etc/hosts"
SHADOW = "/etc/shadow"


def make(folder: str) -> None:
    """Lay out the view in the calling process's new mount namespace (``folder``: the user's, for the hosts copy)."""
    libc.mount("", "/", libc.MS_REC | libc.MS_SLAVE, "none")  # the machine's mounts still come in; none go out
    for path, own in COVERED.items():
        cover(path, own)
    with open(HOSTS, "rb") as fh:
        hosts = _own(folder, "hosts", fh.read(), 0o644)
    libc.mount(hosts, os.path.realpath(HOSTS), libc.MS_BIND)
    libc.mount(_own(folder, "shadow", b"root:*:::::::\n", 0o600), SHADOW, libc.MS_BIND)
    _own("/run", os.path.basename(userns.MARKER), b"", 0o644)


def _own(folder: str, name: str, text: bytes, mode: int) -> str:
    """``name`` in ``folder`` written anew with ``text`` and ``mode`` (a link planted there is replaced, never
    followed); its path."""
    path = os.path.join(folder, name)
    files.write(path, text, mode, sync=False)
    return path


def cover(path: str, own: tuple[str, ...]) -> None:
    """Cover ``path`` with a tmpfs holding a link to each of its entries but those matching ``own``."""
    below = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        entries = [name for name in os.listdir(path) if not any(fnmatch.fnmatch(name, pattern) for pattern in own)]
        libc.mount("nestlab", path, 0, "tmpfs", "mode=0755")
        system = os.path.join(path, SYSTEM)
        os.mkdir(system)
        libc.mount(f"/proc/self/fd/{below}", system, libc.MS_BIND | libc.MS_REC)
    finally:
        os.close(below)
    for name in entries:
        os.symlink(os.path.join(SYSTEM, name), os.path.join(path, name))
