"""Who logs in to a node over SSH: containerlab's ``credentials:`` (username, password, identity-file).

Each key falls back on its own, node > group > kind > defaults, as containerlab resolves them; where
they came from decides where an Ansible inventory puts them (containerlab's rules, ``inventory_vars``).
Read from the topology as data (``Lab.document()``), so a running lab needs no schema to answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .layered import kind_spec

USERNAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # a POSIX user name, as useradd takes it
LINE_BREAKS = "\n\r\0"  # would start a new passwd, shadow or ssh config line
IN_QUOTES = LINE_BREAKS + '"\\'  # would also end ssh_config's quoted IdentityFile


def username_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a login's user name (it goes into a passwd line and an ssh config)."""
    if not USERNAME.fullmatch(name):
        return f"{name!r} is not a user name: lowercase letters, digits, '_' and '-', starting with a letter or '_', at most 32"
    return None


def text_problem(value: str, what: str, forbidden: str) -> str | None:
    """``value`` of ``what`` holding a character of ``forbidden`` (a line break would start a new passwd,
    shadow or ssh config line)."""
    bad = sorted({repr(c) for c in value if c in forbidden})
    return f"{what} may not hold {', '.join(bad)}" if bad else None


@dataclass(frozen=True)
class Login:
    username: str | None = None  # None: root, with the lab's key
    password: str | None = None
    identity_file: str | None = None
    source: str | None = None  # where username/password came from: node (or its group), kind, defaults; None: unset

    def __post_init__(self) -> None:
        if self.username is not None and (problem := username_problem(self.username)):
            raise ValueError(problem)

    @property
    def user(self) -> str:
        return self.username or "root"


def kind_login(doc: dict[str, Any], kind: str) -> Login:
    """What ``kinds:`` says for ``kind`` alone (an inventory's group vars)."""
    given = kind_spec(doc, kind).get("credentials") or {}
    return Login(given.get("username"), given.get("password"))


def inventory_vars(logins: dict[str, Login], kind_login: Login) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """containerlab's placement of ``ansible_user``/``ansible_password`` for the nodes of one kind group:
    (the group's vars, each host's vars).  A host carries its own when they came from the node or its
    group, when the group's nodes differ, or when some came from defaults and some not."""
    users = {n: login.username for n, login in logins.items()}
    words = {n: login.password for n, login in logins.items()}
    sources = {n: login.source for n, login in logins.items()}
    mixed = "defaults" in sources.values() and any(s not in (None, "defaults") for s in sources.values())
    uniform_user, uniform_word = len(set(users.values())) <= 1, len(set(words.values())) <= 1
    group: dict[str, Any] = {}
    first = next(iter(logins.values()), Login())
    from_defaults = "defaults" in sources.values()
    if kind_login.username or (uniform_user and first.username and not from_defaults):
        group["ansible_user"] = kind_login.username or first.username
    if kind_login.password or (uniform_word and first.password and not from_defaults):
        group["ansible_password"] = kind_login.password or first.password
    hosts: dict[str, dict[str, Any]] = {}
    for name, login in logins.items():
        mine = login.source == "node" or mixed
        extra = {}
        if mine or not uniform_user:
            extra["ansible_user"] = login.username
        if mine or not uniform_word:
            extra["ansible_password"] = login.password
        hosts[name] = {k: v for k, v in extra.items() if v is not None}
    return group, hosts
