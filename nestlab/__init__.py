"""nestlab: networks of lightweight containers on one Linux machine, built, shaped and measured.

>>> from nestlab import Lab                       # doctest: +SKIP
>>> with Lab.from_file("examples/quickstart.yml").deployed() as lab:   # doctest: +SKIP
...     print(lab.nodes["h1"].cmd("ping -c1 " + lab.nodes["h2"].intf("eth1").ip))

The names below are imported when first used, so ``nestlab --help`` does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
_WHERE = {
    "Lab": ".lab.lab",
    "Interface": ".lab.node",
    "Node": ".lab.node",
    "LabError": ".errors",
    "TopologyError": ".model.errors",
}
__all__ = [*_WHERE, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module 'nestlab' has no attribute {name!r}")
