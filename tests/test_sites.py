"""Where a deploy goes is the site registry's answer (each site claims the labs it takes), and the Python API's Lab
is a value: reading it reads neither the machine nor a file; a deploy's answer comes back whole (docs/architecture.md).
Nothing here makes a namespace: the sites are stand-ins, and a deploy on this machine fails the test."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nestlab import sites
from nestlab.cli.app import build
from nestlab.engine import deploy as engine_deploy
from nestlab.lab.lab import Lab
from nestlab.plan.diff import Changes
from nestlab.registry import SITES
from nestlab.sites.k8s.site import Target
from nestlab.sites.local import Local
from nestlab.sites.seam import Deployed

CLAIMED = "name: claimed-{n}\ntopology:\n  nodes:\n    a: {{}}\n    b: {{}}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n"


class Aside(Local):
    """A site a test adds as a plug-in would: it takes the labs whose name starts with ``claimed``."""

    name = "aside"
    summary = "a stand-in site"
    rank = 0
    handed: list[str] = []

    @classmethod
    def claims(cls, blueprint, options):
        return blueprint.name.startswith("claimed")

    def deploy(self, blueprint, progress=None, on_exec=None):
        self.handed.append(blueprint.name)
        return Deployed(changes=Changes(), notes=("aside: nothing was made",), blueprint=blueprint)

    def inspect(self, blueprint, only=None):
        return {
            "lab": blueprint.name,
            "source": blueprint.source,
            "nodes": [{"name": "a", "kind": "linux", "host": "aside-host", "state": "up", "interfaces": []}],
        }


@pytest.fixture
def aside(monkeypatch):
    """The stand-in registered for the test; a deploy on this machine is a failure."""
    monkeypatch.setitem(SITES._all(), Aside.name, Aside)
    monkeypatch.setattr(Aside, "handed", [])
    monkeypatch.setattr(engine_deploy, "deploy", lambda *_a, **_k: pytest.fail("deployed on this machine"))
    return Aside


def test_a_site_registered_is_chosen_by_deploy_for_a_lab_it_claims(aside, tmp_path):
    """`nestlab deploy` asks the registry which site claims the lab: a new site is chosen with no change to the
    command, its notes are said, and the table is its own inspect's (the site the command holds)."""
    topo = tmp_path / "lab.yml"
    topo.write_text(CLAIMED.format(n=1))
    result = CliRunner().invoke(build(), ["deploy", "-t", str(topo)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert aside.handed == ["claimed-1"]
    assert "note aside: nothing was made" in result.output and "aside-host" in result.output
    unclaimed = Lab.from_text(CLAIMED.format(n=2).replace("claimed-", "other-"))
    assert sites.chosen(unclaimed.blueprint).name == "local"


def test_a_site_is_made_with_the_options_that_chose_it():
    """The Kubernetes site claims a lab handed a cluster's Target, and is made with it (not given it afterwards)."""
    blueprint = Lab.from_text(CLAIMED.format(n=3).replace("claimed-", "pods-")).blueprint
    target = Target(namespace="labs", count=2)
    site = sites.chosen(blueprint, target)
    assert site.name == "k8s" and site.target is target  # type: ignore[attr-defined]
    assert sites.chosen(blueprint).name == "local"


def test_lab_deploy_answers_what_the_site_did_notes_included(aside):
    lab = Lab.from_text(CLAIMED.format(n=4))
    done = lab.deploy()
    assert isinstance(done, Deployed) and done.notes == ("aside: nothing was made",) and done.changes == Changes()


def test_reading_a_lab_reads_neither_the_machine_nor_a_file(monkeypatch):
    """Every property of a Lab is a value: none reads what the machine is, a management network's leases or a
    lab's records (the hand-out is the engine's, once per deploy)."""
    from nestlab.backends.kernel import mgmtleases, userns
    from nestlab.engine import state, where

    def refused(*_args, **_kwargs):
        pytest.fail("a property of Lab read the machine or a file")

    for owner, name in ((userns, "machine"), (mgmtleases, "snapshot"), (where, "read"), (state, "read")):
        monkeypatch.setattr(owner, name, refused)
    lab = Lab.from_text(CLAIMED.format(n=5))
    properties = sorted(name for name, value in vars(Lab).items() if isinstance(value, property))
    assert {"blueprint", "plan", "nodes"} <= set(properties)
    for name in properties:
        getattr(lab, name)
    assert lab.plan.nodes["a"].name == "a"
