"""The uids that logins on nodes run as (``credentials:``, docs/management.md): one per node with a login.

Nodes share the machine's processes (one PID namespace), so a uid is what keeps a login on one node from signalling
the login on another or reading its ``/proc/PID/environ`` and ``cwd``: each node's login is a user of its own, its
gid the same number.  A node's uid is chosen once, under a lock, from :func:`pool`, and recorded in the lab's keys
folder (``uids``: node to uid) before any login can use it; it stays there until destroy (a node a redeploy drops
keeps its own, and gets it back if it returns), and destroy kills every process of every uid recorded.  None is a
user or group of this machine, a uid a live process holds, another lab's, or in a range ``/etc/subuid`` or
``/etc/subgid`` lends a user (destroy would kill that user's namespace's processes).
"""

from __future__ import annotations

import contextlib
import glob
import grp
import json
import os
import pwd
import signal
import time
from collections.abc import Collection
from functools import cache

from .. import names
from ..backends.kernel import files, locks, procs, userns
from ..errors import LabError

# in the range systemd leaves unused (1879048192-2147352575, systemd.io/UIDS-GIDS), clear of distributions' users
# and of systemd's dynamic, container and nspawn ranges ("pn")
UIDS = range(0x706E_0000, 0x706E_0000 + 65536)
RECORD = "uids"  # in the lab's keys folder: {node: uid}
LEGACY = "uid"  # an older nestlab's one uid for every login of a lab: still killed by destroy, never given again


@cache
def pool() -> range:
    """Where login uids come from: :data:`UIDS`, where this user namespace maps them (the machine's own); in a
    namespace that maps a range of its own (a lab pod's, a rootless user's subordinate ids), the upper half of the
    widest range it maps as uids and gids alike, never 0; empty where it maps one id (no SSH server runs there)."""
    uids, gids = userns.ids("uid"), userns.ids("gid")
    if any(UIDS.start in u and UIDS[-1] in u for u in uids) and any(UIDS.start in g and UIDS[-1] in g for g in gids):
        return UIDS
    common = [range(max(u.start, g.start), min(u.stop, g.stop)) for u in uids for g in gids]
    widest = max(common, key=len, default=range(0))
    return range(max(widest.start + len(widest) // 2, 1), widest.stop)


def recorded(folder: str) -> dict[str, int]:
    """The login uids recorded in a lab's keys ``folder`` (by node), an older nestlab's one uid under ``""``."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError), open(os.path.join(folder, LEGACY)) as fh:
        found[""] = int(fh.read())
    with contextlib.suppress(OSError, ValueError), open(os.path.join(folder, RECORD)) as fh:
        found |= {str(node): int(uid) for node, uid in json.load(fh).items()}
    return found


def given(folder: str, nodes: Collection[str]) -> dict[str, int]:
    """Each of ``nodes``' login uid: the one recorded in the lab's keys ``folder``, else the first of :func:`pool`
    that is free (the module's rules), recorded before it is returned."""
    with locks.file_held(os.path.join(names.KEYS_ROOT, ".uids.lock")):
        mine = recorded(folder)
        wanted = sorted(set(nodes) - set(mine))
        if wanted:
            taken = set(mine.values()) | _held()
            lent = _subordinate()
            free = (uid for uid in pool() if uid not in taken and not _used(uid) and not any(uid in ids for ids in lent))
            for node in wanted:
                if (uid := next(free, None)) is None:
                    raise LabError(f"every login uid of nestlab is taken ({len(pool())}): destroy labs with credentials")
                mine[node] = uid
            files.write(os.path.join(folder, RECORD), json.dumps({n: u for n, u in mine.items() if n}), sync=False)
    return {node: mine[node] for node in nodes}


def _held() -> set[int]:
    """Every uid another lab recorded, and every uid a live process holds (a login a destroyed lab left)."""
    held = {uid for folder in glob.glob(os.path.join(names.KEYS_ROOT, "*", "")) for uid in recorded(folder).values()}
    return held | {uid for pid in procs.others() for uid in procs.uids(pid) or ()}


def _subordinate(paths: tuple[str, ...] = (userns.SUBUID, userns.SUBGID)) -> list[range]:
    """Every range of ids ``/etc/subuid`` and ``/etc/subgid`` lend to users."""
    found = []
    for path in paths:
        with contextlib.suppress(OSError), open(path) as fh:
            for fields in (line.strip().split(":") for line in fh):
                if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                    found.append(range(int(fields[1]), int(fields[1]) + int(fields[2])))
    return found


def _used(uid: int) -> bool:
    """Whether this machine has a user of ``uid`` or a group of that gid."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False


def kill(lab: str) -> None:
    """SIGKILL every process of the lab's login uids (real or effective), again until none is left (a process may
    fork while it goes; at most 5 s): no login outlives its lab, nor reaches the next lab given its uid.  Only uids
    of :func:`pool` (never 0 nor a user of this machine's, whatever the record says)."""
    uids = {uid for uid in recorded(names.lab_keys(lab)).values() if uid in pool()}
    deadline = time.monotonic() + 5
    while uids and (found := procs.of_uids(uids)) and time.monotonic() < deadline:
        for pid in found:
            with contextlib.suppress(OSError):  # gone meanwhile
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
