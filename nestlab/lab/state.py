"""A lab's record on disk (``/run/nestlab/LAB/state.json``) and its lock."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .. import names
from ..backends import namespaces
from ..errors import LabError
from ..plan.objects import Plan


@dataclass
class LabState:
    lab: str
    status: str  # "deploying" or "running"
    pid: int
    source: str | None
    created: float
    topology: dict
    plan: Plan

    def to_json(self) -> dict:
        return {**self.__dict__, "plan": self.plan.to_json()}


def _path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "state.json")


def read(lab: str) -> LabState | None:
    try:
        with open(_path(lab)) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    plan = Plan.from_json(data["plan"])
    for key, live in _read_live(lab).items():
        if live.get("removed"):
            plan.links.pop(key, None)
        elif key in plan.links:
            plan.links[key] = dataclasses.replace(
                plan.links[key], shape_a=_pairs(live["shape_a"]), shape_b=_pairs(live["shape_b"]), state=live["state"], mtu=live["mtu"]
            )
    return LabState(**{**data, "plan": plan})


def write(state: LabState) -> None:
    """Write the whole state; live link changes recorded since are now part of it."""
    _atomic(_path(state.lab), json.dumps(state.to_json()))  # dumps uses the C encoder; dump(fh) does not
    try:
        os.unlink(_live_path(state.lab))
    except FileNotFoundError:
        pass


def write_link(lab: str, link, removed: bool = False) -> None:
    """Record one link's live shaping and state, or its removal (a small file beside the state: cheap per change)."""
    live = _read_live(lab)
    live[link.key] = {"shape_a": link.shape_a, "shape_b": link.shape_b, "state": link.state, "mtu": link.mtu, "removed": removed}
    _atomic(_live_path(lab), json.dumps(live))


def write_resources(lab: str, node: str, values: dict) -> None:
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


def _read_live(lab: str) -> dict:
    try:
        with open(_live_path(lab)) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def _pairs(items) -> tuple:
    return tuple(tuple(x) for x in items)


def _atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


@contextmanager
def locked(lab: str) -> Iterator[None]:
    """Hold the lab's lock: one deploy/destroy/cleanup of a lab at a time."""
    namespaces.in_memory(names.STATE_ROOT)
    os.makedirs(names.lab_dir(lab), exist_ok=True)
    fd = os.open(os.path.join(names.lab_dir(lab), "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(f"lab '{lab}' is busy: another nestlab process is deploying or destroying it") from None
        yield
    finally:
        os.close(fd)


def labs() -> list[str]:
    """Every lab with anything on this machine: a state directory, a namespace or a cgroup."""
    from ..backends.cgroups import lab_cgroups

    found = set(lab_cgroups())
    if os.path.isdir(names.STATE_ROOT):
        found.update(e.name for e in os.scandir(names.STATE_ROOT) if e.is_dir())
    if os.path.isdir(names.NETNS_DIR):
        found.update(lab for e in os.scandir(names.NETNS_DIR) if (lab := names.lab_of_netns(e.name)))
    return sorted(found)
