"""Labs as the API shows them: each account's own (listed and changed through nestlab run as the account), an
administrator's view of every account's, and the checks made before anything is changed."""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import yaml

from ..model.bind import Bind
from ..rootless.holder import PIDFILE
from . import accounts
from .accounts import Account
from .errors import ApiError, not_found
from .runner import Done, Nestlab, RunAs, run

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
Containers = list[dict[str, Any]]


def checked_name(what: str, text: str) -> str:
    """``text`` if it is a plain name (letters, digits, '-', '_'; at most 64), else 400 naming what is wrong."""
    if not _NAME.fullmatch(text):
        shown = json.dumps(text[:80])
        raise ApiError(400, f"Invalid characters in {what} name {shown}: use letters, digits, '-' and '_' (at most 64)")
    return text


def holds_nul(value: object) -> bool:
    """Whether a NUL character is in any string (key or value) of a parsed JSON or YAML document (no name, path or
    command of a lab holds one: the kernel's calls end a string at it)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def refuse_nul(value: object, what: str) -> None:
    """400 if ``value`` holds a NUL character anywhere."""
    if holds_nul(value):
        raise ApiError(400, f"Invalid {what}: a NUL character in a value (no name, path or command may hold one)")


@dataclass(frozen=True)
class Target:
    """A lab found for a request: whose it is (``owner``: the account it runs as) and its containers."""

    lab: str
    owner: RunAs
    containers: Containers

    @property
    def topology(self) -> str:
        """The file the lab was deployed from, as its inspect says."""
        return str(self.containers[0].get("absLabPath", "")) if self.containers else ""


def _holding(home: str) -> bool:
    """Whether an account has a holder (so possibly labs): its pidfile (docs/rootless.md)."""
    return os.path.exists(os.path.join(home, ".local", "state", "nestlab", PIDFILE))


class Labs:
    """The labs of the machine as accounts see them, through ``nestlab`` run as their owners."""

    def __init__(self, nestlab: Nestlab, deploy_timeout: float = 600) -> None:
        self.nestlab = nestlab
        self.deploy_timeout = deploy_timeout

    async def of(self, who: RunAs) -> dict[str, Containers]:
        """``who``'s own labs: {lab: containers}, each container's owner the account's name."""
        if not who.is_root and not _holding(who.home):
            return {}
        done = await self.nestlab(who, "clab", "inspect", "--all", "--format", "json", timeout=120)
        if done.code:
            raise ApiError(500, f"listing {who.name}'s labs failed: {done.reason}")
        labs: dict[str, Containers] = json.loads(done.stdout or "{}")
        if not who.is_root:
            for found in labs.values():
                for container in found:
                    container["owner"] = who.name
        return labs

    def _owners(self, account: Account) -> list[RunAs]:
        """Whose labs ``account`` sees: its own (root's for an administrator), and for an administrator every
        allowed ordinary account's too."""
        if not account.admin:
            return [RunAs.user(account)]
        users = [a for a in (accounts.lookup(n) for n in accounts.members()) if a is not None and not a.admin]
        return [RunAs.root(), *(RunAs.user(a) for a in users)]

    async def visible(self, account: Account) -> list[tuple[RunAs, dict[str, Containers]]]:
        owners = self._owners(account)
        found = await asyncio.gather(*(self.of(who) for who in owners))
        return list(zip(owners, found))

    async def listing(self, account: Account) -> dict[str, Containers]:
        """Every lab ``account`` may see, as containerlab's inspect --all JSON."""
        merged: dict[str, Containers] = {}
        for _who, labs in await self.visible(account):
            for lab, containers in labs.items():
                merged.setdefault(lab, []).extend(containers)
        return merged

    async def find(self, account: Account, lab: str) -> list[Target]:
        """The labs called ``lab`` that ``account`` may act on (its own; for an administrator root's first, then each
        user's); 404 when there is none."""
        targets = [Target(lab, who, labs[lab]) for who, labs in await self.visible(account) if lab in labs]
        if not targets:
            raise not_found(lab)
        return targets

    async def one(self, account: Account, lab: str) -> Target:
        return (await self.find(account, lab))[0]

    async def mine(self, who: RunAs, lab: str) -> Containers | None:
        """``who``'s lab ``lab``'s containers, None if it has none of that name."""
        return (await self.of(who)).get(lab)

    async def inspect(self, who: RunAs, lab: str) -> dict[str, Containers]:
        done = await self.nestlab(who, "clab", "inspect", "--name", lab, "--format", "json", timeout=120)
        if done.code:
            raise failed(done, f"inspecting lab '{lab}'")
        labs: dict[str, Containers] = json.loads(done.stdout or "{}")
        if not who.is_root:
            for container in labs.get(lab, []):
                container["owner"] = who.name
        return labs


def failed(done: Done, doing: str) -> ApiError:
    """A nestlab command's failure as an answer: 400 for what the request gave (exit 2: the topology or the command
    line), 422 for what cannot be done here (exit 1, with nestlab's reason)."""
    return ApiError(400 if done.code == 2 else 422, f"{doing} failed: {done.reason}")


def topology_text(content: Any) -> tuple[str, dict[str, Any]]:
    """The topology a deploy gives (a JSON object, or YAML text) as YAML text and the document it holds; 400 if it
    is neither or names no lab."""
    if isinstance(content, str):
        try:
            document = yaml.safe_load(content)
        except yaml.YAMLError as exc:
            raise ApiError(400, f"Invalid topology YAML: {exc}") from None
        text = content
    else:
        document, text = content, yaml.safe_dump(content, sort_keys=False)
    refuse_nul(document, "topology")
    if not isinstance(document, dict):
        raise ApiError(400, "topologyContent must be a topology: an object with 'name' and 'topology'")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError(400, "JSON topology must contain a top-level 'name' field.")
    checked_name("topology 'name' (lab)", name)
    return text, document


def bind_sources(document: dict[str, Any], folder: str) -> list[str]:
    """Every bind's source path in the topology (nodes, kinds, groups, defaults), made absolute from ``folder``."""
    topology = document.get("topology") or {}
    holders: list[Any] = [topology.get("defaults")]
    for section in ("nodes", "kinds", "groups"):
        found = topology.get(section)
        if isinstance(found, dict):
            holders.extend(found.values())
    sources = []
    for holder in holders:
        binds = holder.get("binds") if isinstance(holder, dict) else None
        for bind in binds if isinstance(binds, list) else []:
            source = Bind(str(bind)).source
            sources.append(os.path.normpath(os.path.join(folder, os.path.expanduser(source))))
    return sources


async def unreadable(who: RunAs, paths: list[str]) -> list[str]:
    """The ``paths`` ``who`` cannot read (the kernel says, in a process of the account's)."""
    if not paths or who.is_root:
        return []
    script = 'for p; do [ -r "$p" ] || printf "%s\\n" "$p"; done'
    done = await run(who, ["sh", "-c", script, "sh", *paths], timeout=30)
    return done.stdout.splitlines()


async def write_file(who: RunAs, folder: str, name: str, text: str) -> str:
    """``text`` written to ``folder``/``name`` by a process of ``who``'s (so only where the account may write); its path."""
    path = os.path.join(folder, name)
    script = 'umask 077; mkdir -p -- "$1" && cat > "$2"'
    done = await run(who, ["sh", "-c", script, "sh", folder, path], stdin=text.encode(), timeout=30)
    if done.code:
        raise ApiError(403, f"cannot write {path} as {who.name}: {done.reason}")
    return path


async def remove_folder(who: RunAs, folder: str) -> None:
    """The lab's folder removed by a process of ``who``'s."""
    await run(who, ["rm", "-rf", "--", folder], timeout=60)
