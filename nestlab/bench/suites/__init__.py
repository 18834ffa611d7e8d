"""The benchmark suites, by the name `nestlab bench SUITE` takes (one module per seed paper).

A suite is a module with a ``SUITE`` (suite.Suite); listing it here adds its command.
"""

from __future__ import annotations

from ..suite import Suite
from . import kernel_modules, lxc_modes, multipath, nested

SUITES: dict[str, Suite] = {suite.name: suite for suite in (lxc_modes.SUITE, kernel_modules.SUITE, nested.SUITE, multipath.SUITE)}
