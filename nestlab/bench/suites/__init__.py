"""The benchmark suites, by the name `nestlab bench SUITE` takes (one module per seed paper)."""

from __future__ import annotations

from ..scenario import Suite
from . import lxc_modes

SUITES: dict[str, Suite] = {suite.name: suite for suite in (lxc_modes.SUITE,)}
