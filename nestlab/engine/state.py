"""A lab's record on disk (``/run/nestlab/LAB/state.json``) and its lock."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from .. import names
from ..backends.kernel import files, locks, namespaces
from ..backends.kernel.cgroups import lab_cgroups
from ..errors import LabError
from ..plan.objects import LinkObj, Pairs, Plan
from . import gc_pause, handout

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint


@dataclass
class LabState:
    lab: str
    status: str  # "deploying" or "running"
    pid: int
    source: str | None
    created: float
    topology: dict[str, Any]  # the document, as a Blueprint's
    plan: Plan

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "plan": self.plan.to_json()}


class LiveChange(TypedDict):
    """A link's live change as ``links.json`` records it (its pairs read back as JSON lists)."""

    shape_a: Sequence[Sequence[str]]
    shape_b: Sequence[Sequence[str]]
    state: str | None
    mtu: int | None
    removed: bool


def snapshot(blueprint: Blueprint, status: str, plan: Plan) -> LabState:
    """The lab's state record: ``status`` (deploying, running), its topology as data and ``plan``."""
    return LabState(blueprint.name, status, os.getpid(), blueprint.source, time.time(), blueprint.document, plan)


def _path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "state.json")


@gc_pause.paused()
def read(lab: str) -> LabState | None:
    """The lab's state, None if it has none; a damaged state file is a LabError pointing at cleanup
    (which finds the lab by its marker, not by this file)."""
    try:
        with open(_path(lab), "rb") as fh:
            data = json.loads(fh.read())
        plan = Plan.from_json(data["plan"])
        for key, live in _read_live(lab).items():
            if key in plan.links:
                if (changed := _with_live(plan.links[key], live)) is None:
                    del plan.links[key]
                else:
                    plan.links[key] = changed
        return LabState(**{**data, "plan": plan})
    except FileNotFoundError:
        return None
    except (ValueError, LookupError, TypeError, AttributeError) as exc:
        raise LabError(
            f"the state of lab '{lab}' is damaged ({type(exc).__name__}: {str(exc)[:120]}); "
            f"`nestlab cleanup {lab}` removes the lab by its marker"
        ) from None


def read_link(lab: str, a: str, b: str) -> LinkObj | None:
    """The link between ``a`` and ``b`` of a running lab as its state has it (live changes included), read
    without building the rest of the plan; None if the lab is not running, has no such link, or its state
    cannot be read (``read`` says why)."""
    try:
        with open(_path(lab), "rb") as fh:
            data = json.loads(fh.read())
        link = Plan.link_from_json(data["plan"], a, b) if data["status"] == "running" else None
        live = _read_live(lab).get(link.key) if link else None
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return None
    return link if link is None or live is None else _with_live(link, live)


def _with_live(link: LinkObj, live: LiveChange) -> LinkObj | None:
    """``link`` with its recorded live change (shaping, state, MTU); None if the change removed it."""
    if live.get("removed"):
        return None
    return dataclasses.replace(
        link, shape_a=_pairs(live["shape_a"]), shape_b=_pairs(live["shape_b"]), state=live["state"], mtu=live["mtu"]
    )


def write(state: LabState) -> None:
    """Write the whole state (root's alone, 0600: a topology holds startup-configs, ``env:`` values and
    passwords); live link changes recorded since are now part of it."""
    _written(_path(state.lab), json.dumps(state.to_json()))  # dumps: the C encoder
    _live_merged(state.lab)


def _live_merged(lab: str) -> None:
    """The live link changes are part of the whole state just written: their file goes."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_live_path(lab))


def write_link(lab: str, link: LinkObj, removed: bool = False) -> None:
    """Record one link's live shaping and state, or its removal (a small file beside the state: cheap per change)."""
    live = _read_live(lab)
    live[link.key] = {"shape_a": link.shape_a, "shape_b": link.shape_b, "state": link.state, "mtu": link.mtu, "removed": removed}
    _written(_live_path(lab), json.dumps(live))


def write_resources(lab: str, node: str, values: Mapping[str, object]) -> None:
    """Record a node's live cgroup limits in the state (``"none"`` drops a key)."""
    current = read(lab)
    if current is None or node not in current.plan.nodes:
        return
    obj = current.plan.nodes[node]
    merged = {**dict(obj.resources), **{k: str(v) for k, v in values.items()}}
    current.plan.nodes[node] = dataclasses.replace(obj, resources=tuple(sorted((k, v) for k, v in merged.items() if v != "none")))
    write(current)


def _live_path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "links.json")


def _read_live(lab: str) -> dict[str, LiveChange]:
    try:
        with open(_live_path(lab)) as fh:
            live: dict[str, LiveChange] = json.load(fh)
            return live
    except FileNotFoundError:
        return {}


def _pairs(items: Iterable[Sequence[str]]) -> Pairs:
    return tuple((key, value) for key, value in items)


def _written(path: str, text: str) -> None:
    """Write a file whole, or leave none (a full disk must not leave half a file), root's alone (0600)."""
    files.write(path, text, 0o600, sync=False)  # /run is memory: nothing to sync


def prepared(state: LabState) -> tuple[Callable[[], None], Callable[[], None]]:
    """Write the whole state beside the current one now, so a full disk stops a deploy before it
    changes anything; returns (commit: put it in place, a rename that needs no space; drop)."""
    path = _path(state.lab)
    tmp = f"{path}.next"
    _written(tmp, json.dumps(state.to_json()))

    def commit() -> None:
        os.replace(tmp, path)
        _live_merged(state.lab)

    def drop() -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)

    return commit, drop


LOCK_WAIT = 120.0  # seconds a command waits for another one changing the same lab


@contextmanager
def locked(lab: str, wait: float = LOCK_WAIT, create: bool = True) -> Iterator[None]:
    """Hold the lab's lock: one deploy/destroy/cleanup/link change of a lab at a time.  Waits up to
    ``wait`` seconds for another holder; ``create=False`` for a lab that must already exist."""
    if create:
        namespaces.in_memory(names.STATE_ROOT)
        make_folder(lab)
    elif not os.path.isdir(names.lab_dir(lab)):
        raise LabError(f"lab {lab} is not running")
    try:
        fd = locks.lock_fd(os.path.join(names.lab_dir(lab), "lock"))
    except FileNotFoundError:
        raise LabError(f"lab {lab} is not running") from None
    try:
        try:
            locks.acquire(fd, wait)
        except locks.Busy:
            raise LabError(f"lab '{lab}' is busy: another nestlab process has been changing it for {wait:g} s") from None
        yield
    finally:
        os.close(fd)


def make_folder(lab: str) -> str:
    """The lab's state folder, made if missing: root's alone (0700), as every file in it is."""
    folder = names.lab_dir(lab)
    files.make_dirs(folder, 0o700)
    os.chmod(folder, 0o700)  # made by an older nestlab: 0755
    return folder


def labs() -> list[str]:
    """Every lab with anything on this machine: a state directory, a namespace or a cgroup."""

    found = set(lab_cgroups()) if handout.machine().cgroups else set()  # rootless mode's labs have none
    if os.path.isdir(names.STATE_ROOT):
        found.update(e.name for e in os.scandir(names.STATE_ROOT) if e.is_dir())
    if os.path.isdir(names.NETNS_DIR):
        found.update(lab for e in os.scandir(names.NETNS_DIR) if (lab := names.lab_of_netns(e.name)))
    return sorted(found)
