"""Live changes to a running lab's links, from Python: shaping and up/down, applied in place and logged.

Example::

    lab = Lab.running("manet")
    lab.link("a:eth1", "b:eth1").set(rate="10mbit", delay="20ms")
    lab.link("a:eth1", "b:eth1").set(state="down")
"""

from __future__ import annotations

from ..engine.link_changes import CLEAR, LiveLink

__all__ = ["CLEAR", "LinkHandle"]


class LinkHandle(LiveLink):
    """One link of a running lab on this machine, found by its two endpoints in either order: :meth:`set` changes
    its shaping or state, :meth:`show` says what is planned and in force, :meth:`remove` and :meth:`restore` take
    it away and bring it back (the engine's :class:`~nestlab.engine.link_changes.LiveLink` does each)."""
