"""Every script in benchmarks/ still runs: each at its smallest size (``--smoke``: a few nodes, one round, a second
of traffic) exits 0 and prints its table.  Scripts are found by name, so a new one is run without a change here;
``_*.py`` are the helpers they share.  ``k8s_*.py`` need the cluster built from source: they run in the Kubernetes
tier (``make test-k8s``).  A script whose machine lacks what it measures exits 77 and is skipped, saying why."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
SKIPPED = 77
TABLE = re.compile(r"^\|.*\|\n\|(---\|)+\n(\|.*\|\n)+", re.M)  # a header, its rule and at least one row


def smoke(script):
    return pytest.param(script, id=script.stem, marks=[pytest.mark.k8s] if script.stem.startswith("k8s_") else [])


@pytest.mark.parametrize("script", [smoke(s) for s in SCRIPTS])
def test_benchmark_runs_at_its_smallest_size(script, tmp_path):
    done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if done.returncode == SKIPPED:
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, f"{script.name} --smoke failed:\n{done.stderr[-3000:]}"
    assert TABLE.search(done.stdout), f"{script.name} --smoke printed no table:\n{done.stdout[-3000:]}"
