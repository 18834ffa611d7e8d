"""Routers' running configurations saved (``nestlab save``, ``Lab.save``): each frr node's, asked of the node."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .. import names
from ..backends.services import frr


def saved(lab: str, routers: dict[str, Callable[..., Any]], to: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Write each router's running configuration (``show running-config``, through ``routers[name]``: a Popen
    in the node) over its frr.conf in the lab's folder, and into ``to``/NODE/frr.conf when given; returns the
    files by node."""
    written = {}
    for name, popen in routers.items():
        text = frr.running_config(name, popen)
        mine = os.path.join(names.node_dir(lab, name), "etc", "frr")
        frr.save(mine, text)
        written[name] = os.path.join(mine, "frr.conf")
        if to is not None:
            written[name] = frr.save_to(os.fspath(to), name.replace("/", "."), text)
    return written
