"""Live changes to the links of a lab on this machine: shaping, MTU and up/down applied in place, recorded
with the lab's state and logged as events; a link removed and restored (schedules).  The Python API's
``lab.link(a, b)`` (lab/link_handle.py) and the local site's ``link set`` are this."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .. import names
from ..backends.kernel import probe, shaping
from ..backends.services import traceplay
from ..errors import LabError
from ..model import shape_keys
from ..model.errors import Problem, TopologyError
from ..plan.diff import Changes
from ..plan.objects import EndObj, LinkObj
from . import events, state

if TYPE_CHECKING:
    from types import ModuleType

    from .nodes import LabView

CLEAR = "none"  # a value that removes a key, e.g. set(delay="none")
Value = str | int | float  # a setting's value as given: "10mbit", 1400, 0.5...


class LiveLink:
    """One link of a running lab, found by its two endpoints in either order."""

    def __init__(self, view: LabView, a: str, b: str, shaper: shaping.Shaper | None = None, obj: LinkObj | None = None):
        """``obj``: the link as the caller already read it from the lab's state (else it is looked up)."""
        self.lab = view
        self.obj = obj or find(view, a, b)
        self.reversed = self.obj.a.ref != a
        self._shaper = shaper

    @contextmanager
    def _shaping(self) -> Iterator[shaping.Shaper]:
        """The shared shaper this handle was given, or one of its own for one call."""
        if self._shaper is not None:
            yield self._shaper
            return
        shaper = shaping.Shaper()
        try:
            yield shaper
        finally:
            shaper.close()

    def set(self, *, direction: str = "both", scheduled: float | None = None, **params: Value) -> float:
        """Change shaping keys (``rate``, ``delay``, ``loss``...; ``"none"`` removes one) and/or ``state``.

        ``direction``: ``both``, or ``a``/``b`` for what that endpoint (as you named it) sends.
        Returns the milliseconds it took until the kernel had the change.  The change is logged.
        """
        return self.prepare(direction=direction, **params)(scheduled)

    def prepare(self, *, direction: str = "both", **params: Any) -> Callable[[float | None], float]:
        """Check and work out a :meth:`set` now; the returned call only touches the kernel (a schedule's hot path)."""
        new_state = params.pop("state", None)
        mtu = _mtu(params.pop("mtu", None))
        _check(direction, params, new_state)
        updated = self._updated(direction, params, new_state, mtu)
        ends = [  # (end, its new shape or None when unchanged, its trace (and the trace's queue) before and after)
            (end, dict(new) if new != old else None, _traced(old), _traced(new))
            for end, old, new in (
                (self.obj.a, self.obj.shape_a, updated.shape_a),
                (self.obj.b, self.obj.shape_b, updated.shape_b),
            )
        ]
        what = {"link": updated.key, "set": params, "state": new_state, **({"mtu": mtu} if mtu is not None else {})}

        def commit(scheduled: float | None = None) -> float:
            with state.locked(self.lab.name, create=False):  # not in the middle of a deploy or destroy
                started = time.perf_counter()
                with self._shaping() as shaper:
                    for end, new_shape, old_trace, new_trace in ends:
                        self._change_end(shaper, end, new_shape, old_trace, new_trace, mtu, new_state)
                    applied, spent = time.time(), (time.perf_counter() - started) * 1000
                self.obj = updated
                _store(self.lab, updated)
            events.record(self.lab.name, what, applied, spent, scheduled)
            return spent

        return commit

    def _updated(self, direction: str, params: dict[str, Any], new_state: str | None, mtu: int | None) -> LinkObj:
        """The link with ``params`` set on the sides ``direction`` names (as the caller named the ends)."""
        sides = {"both": ("a", "b"), "a": ("b",) if self.reversed else ("a",), "b": ("a",) if self.reversed else ("b",)}[
            direction
        ]
        shape = {"a": dict(self.obj.shape_a), "b": dict(self.obj.shape_b)}
        for side in sides:
            for key, value in params.items():
                if value == CLEAR:
                    shape[side].pop(key, None)
                else:
                    shape[side].pop({"trace": "rate", "rate": "trace"}.get(key, ""), None)  # each sets the rate
                    shape[side][key] = str(value)
        return dataclasses.replace(
            self.obj,
            shape_a=tuple(sorted(shape["a"].items())),
            shape_b=tuple(sorted(shape["b"].items())),
            state=new_state or self.obj.state,
            mtu=mtu if mtu is not None else self.obj.mtu,
        )

    def _change_end(
        self,
        shaper: shaping.Shaper,
        end: EndObj,
        new_shape: dict[str, str] | None,
        old_trace: tuple[str, int] | None,
        new_trace: tuple[str, int] | None,
        mtu: int | None,
        new_state: str | None,
    ) -> None:
        """One end's kernel side of a change: its trace player, shaping, MTU and state."""
        path, iface = names.netns_path(self.lab.name, end.node), end.iface
        replay = new_trace is not None and (  # the same trace and queue again restarts a dead player
            new_trace != old_trace or traceplay.health(self.lab.name, end.node, iface)["player"] == "dead"
        )
        if old_trace is not None and (new_trace is None or replay):  # its player goes
            traceplay.stop(self.lab.name, end.node, iface)
        if new_shape is not None:
            shaper.apply(path, iface, new_shape)
        if replay and new_trace is not None:  # a new player follows the new trace, or the trace with its new queue
            traceplay.start(self.lab.name, end.node, iface, *new_trace)
        if mtu is not None:
            shaper.set_mtu(path, iface, mtu)
        if new_state:
            shaper.set_state(path, iface, new_state == "up")

    def remove(self, scheduled: float | None = None) -> float:
        """Delete the link's interfaces (a schedule's ``action: remove``); :meth:`restore` brings it back."""
        started = time.perf_counter()
        with self._shaping() as shaper:
            from ..registry import LINK_MODES  # the link modes: only a removal needs them

            for end in LINK_MODES.get(self.obj.mode).devices(self.obj):
                shaper.delete(names.netns_path(self.lab.name, end.node), end.iface)
            for end in (self.obj.a, self.obj.b):
                shaper.forget(names.netns_path(self.lab.name, end.node), end.iface)
            applied, spent = time.time(), (time.perf_counter() - started) * 1000
        state.write_link(self.lab.name, self.obj, removed=True)
        events.record(self.lab.name, {"link": self.obj.key, "action": "remove"}, applied, spent, scheduled)
        return spent

    def restore(self, scheduled: float | None = None) -> float:
        """Create the removed link again, as planned (addresses, shaping, state)."""
        from ..apply.applier import Applier

        started = time.perf_counter()
        current = state.read(self.lab.name)
        nodes = current.plan.nodes if current else self.lab.plan.nodes
        Applier(self.lab.name, nodes).apply(Changes(add_links=[self.obj]))
        applied, spent = time.time(), (time.perf_counter() - started) * 1000
        state.write_link(self.lab.name, self.obj)
        events.record(self.lab.name, {"link": self.obj.key, "action": "add"}, applied, spent, scheduled)
        return spent

    def show(self) -> dict[str, Any]:
        """Planned shapes and what the kernel has in force, per direction."""
        with self._shaping() as shaper:
            kernel = {
                end.ref: shaper.show(names.netns_path(self.lab.name, end.node), end.iface) for end in (self.obj.a, self.obj.b)
            }
        return {
            "link": self.obj.key,
            "state": self.obj.state or "up",
            "sends": {self.obj.a.ref: dict(self.obj.shape_a), self.obj.b.ref: dict(self.obj.shape_b)},
            "kernel": kernel,
        }


def _mtu(given: object) -> int | None:
    """A change's ``mtu``, a number in 68..65535 (or None: unchanged)."""
    if given is None:
        return None
    try:
        mtu = int(str(given), 10)
    except ValueError:
        mtu = -1
    if not 68 <= mtu <= 65535:
        raise TopologyError("<link set>", [Problem(("mtu",), f"{given!r} is not a number in 68..65535")])
    return mtu


def _check(direction: str, params: dict[str, Any], new_state: str | None) -> None:
    """Refuse a change the model refuses, or one needing netem where the kernel lacks it (nothing changed)."""
    if direction not in ("both", "a", "b"):
        raise TopologyError("<link set>", [Problem(("direction",), f"{direction!r}: both, a or b")])
    setting = {k: v for k, v in params.items() if v != CLEAR}
    if wrong := shape_keys.problems(setting | ({"state": new_state} if new_state else {})):
        raise TopologyError("<link set>", [Problem((key,), message) for key, message in wrong])
    if set(setting) & set(shaping.NETEM_KEYS) and (missing := _probe().missing_for({"netem"})):
        raise LabError(f"this change needs {missing[0]}, which this kernel lacks; nothing was changed. See `nestlab doctor`")


def find(view: LabView, a: str, b: str) -> LinkObj:
    """The running lab's link between ``a`` and ``b`` (in either order), as its state records it."""
    current = state.read(view.name)
    links = current.plan.links if current else view.plan.links  # the running lab's shaping, live changes included
    for link in links.values():
        if {link.a.ref, link.b.ref} == {a, b}:
            return link
    known = ", ".join(f"{x.a.ref} {x.b.ref}" for x in view.plan.links.values()) or "none"
    raise LabError(f"lab {view.name} has no link between {a} and {b} (links: {known})")


def _store(view: LabView, link: LinkObj) -> None:
    """Record the new shaping with the running lab, so `deploy` and `link show` know it."""
    if not os.path.exists(names.lab_dir(view.name)):
        raise LabError(f"lab {view.name} is not running")
    state.write_link(view.name, link)


def _probe() -> ModuleType:
    """backends.kernel.probe, which loads every link mode: only a change that needs netem asks it."""

    return probe


def _traced(shape: tuple[tuple[str, str], ...]) -> tuple[str, int] | None:
    """The delivery trace a direction follows and its player's queue (None: no trace)."""
    params = dict(shape)
    return (params["trace"], int(params.get("queue", 1000))) if params.get("trace") else None


def shown(view: LabView, a: str | None = None, b: str | None = None) -> list[dict[str, Any]]:
    """Each link's shaping as planned and as the kernel has it (only the link between ``a`` and ``b``, when given),
    read with one shaper and the state read once."""
    current = state.read(view.name)
    links = current.plan.links.values() if current else view.plan.links.values()
    chosen = [x for x in links if a is None or {x.a.ref, x.b.ref} == {a, b}]
    if a is not None and not chosen:
        raise LabError(f"lab {view.name} has no link between {a} and {b}")
    shaper = shaping.Shaper()
    try:
        return [LiveLink(view, x.a.ref, x.b.ref, shaper, obj=x).show() for x in chosen]
    finally:
        shaper.close()
