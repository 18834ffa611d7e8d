"""Who signs in: a Linux account, allowed by its groups, and what it may do (an administrator or a user)."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass

# Groups that let an account in: containerlab's API server's names (its apps' docs use them) and nestlab's own.
ADMIN_GROUPS = ("clab_admins", "nestlab-admins")
USER_GROUPS = ("clab_api", "nestlab")


@dataclass(frozen=True)
class Account:
    """A Linux account allowed in; ``admin`` accounts' labs run as root, the others' as the account."""

    name: str
    uid: int
    gid: int
    home: str
    groups: tuple[str, ...]
    admin: bool

    @property
    def gids(self) -> list[int]:
        """The account's groups, as initgroups(3) would set them."""
        return os.getgrouplist(self.name, self.gid)


def groups_of(name: str, gid: int) -> tuple[str, ...]:
    """The names of every group ``name`` is in (its primary group too), read from the machine now."""
    found = []
    for number in os.getgrouplist(name, gid):
        try:
            found.append(grp.getgrgid(number).gr_name)
        except KeyError:
            continue
    return tuple(found)


def lookup(name: str) -> Account | None:
    """The account called ``name`` if it exists and one of its groups lets it in, else None (read afresh each time:
    a user taken out of the groups is out at the next request)."""
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):
        return None
    groups = groups_of(entry.pw_name, entry.pw_gid)
    admin = any(g in groups for g in ADMIN_GROUPS)
    if not admin and not any(g in groups for g in USER_GROUPS):
        return None
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, groups, admin)


def members() -> list[str]:
    """Every account some allowing group names (by membership or as its primary group), sorted."""
    names: set[str] = set()
    gids = set()
    for group in (*ADMIN_GROUPS, *USER_GROUPS):
        try:
            entry = grp.getgrnam(group)
        except KeyError:
            continue
        names.update(entry.gr_mem)
        gids.add(entry.gr_gid)
    names.update(p.pw_name for p in pwd.getpwall() if p.pw_gid in gids)
    return sorted(n for n in names if lookup(n) is not None)


def details(account: Account) -> dict[str, object]:
    """The account as clab-api-server's user routes show it."""
    entry = pwd.getpwnam(account.name)
    return {
        "username": account.name,
        "uid": str(account.uid),
        "gid": str(account.gid),
        "displayName": entry.pw_gecos.split(",")[0],
        "homeDir": account.home,
        "shell": entry.pw_shell,
        "groups": list(account.groups),
        "isSuperuser": account.admin,
        "isApiUser": any(g in account.groups for g in USER_GROUPS) or account.admin,
    }
