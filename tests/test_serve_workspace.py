"""The web app's workspace routes keep to the caller's ~/.clab, and its netem form's empty fields ask for nothing
(pure checks, no server: the routes themselves run in the browser flow, docs/serve.md)."""

from __future__ import annotations

import pytest

from nestlab.serve import workspace
from nestlab.serve.errors import ApiError
from nestlab.serve.runner import RunAs
from nestlab.serve.session_routes import _given

ALICE = RunAs("alice", 1500, 1500, (1500,), "/home/alice")


def test_a_workspace_path_stays_in_the_workspace():
    assert workspace.inside(ALICE, "web1/web1.clab.yml") == "/home/alice/.clab/web1/web1.clab.yml"
    assert workspace.lab_file(ALICE, "web1", "web1.clab.yml") == "/home/alice/.clab/web1/web1.clab.yml"
    for hostile in ("../.ssh/id_rsa", "web1/../../x", "/etc/shadow", "a\x00b"):
        with pytest.raises(ApiError) as refused:
            workspace.inside(ALICE, hostile)
        assert refused.value.status == 400 and "without '..'" in refused.value.reason


def test_the_apps_empty_netem_fields_ask_for_nothing():
    form = {"containerName": "clab-web1-a", "interface": "eth1", "delay": "0ms", "jitter": "0ms", "loss": 0, "rate": 2000}
    assert _given(form) == {"containerName": "clab-web1-a", "interface": "eth1", "loss": 0, "rate": 2000}
    assert _given({"delay": "50ms", "jitter": "bad"}) == {"delay": "50ms", "jitter": "bad"}  # left for the check to refuse
