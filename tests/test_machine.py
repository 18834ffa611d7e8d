"""What the machine is (plan/machine.py), read once and carried in the blueprint: planning decides from it what
rootless mode leaves out, so no plan is rewritten afterwards; what needs the machine's root is refused from the
plan alone; each node's plan carries how people and tools reach it, through the state record too."""

from __future__ import annotations

import json

import pytest

from nestlab.engine import access, machine_root
from nestlab.errors import LabError
from nestlab.lab.lab import Lab
from nestlab.plan.blueprint import Blueprint
from nestlab.plan.machine import Machine
from nestlab.plan.mgmt import Leases
from nestlab.plan.objects import Plan

TOPOLOGY = """
name: {name}
topology:
  nodes:
    r1: {{kind: frr}}
    h1: {{kind: linux, resources: {{memory: 64M}}}}
  links:
    - endpoints: [r1:eth1, h1:eth1]
"""

MANAGED = """
name: {name}
prefix: pp
mgmt: {{network: {name}}}
topology:
  defaults:
    credentials: {{username: alice}}
  groups:
    g1:
      credentials: {{username: bob, identity-file: keys/id}}
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux, group: g1}}
"""


def _planned(text: str, machine: Machine) -> Blueprint:
    made = Lab.from_text(text, "<text>").blueprint
    return Blueprint(made.name, made.source, made.document, checked=made.topology, leases=made.leases, machine=machine)


def test_a_guest_plans_no_cgroups_and_frr_root_unless_other_ids_are_mapped(lab_name):
    text = TOPOLOGY.format(name=lab_name)
    root = _planned(text, Machine()).plan.nodes
    assert root["h1"].cgroup and dict(root["r1"].run_dirs)["/run/frr"] == "frr"
    alone = _planned(text, Machine(guest=True, maps_others=False, home="/home/u"))
    assert not alone.plan.nodes["h1"].cgroup and dict(alone.plan.nodes["r1"].run_dirs)["/run/frr"] == "root"
    assert machine_root.refused(alone) == ("cgroup limits not applied: rootless (h1)",)
    mapped = _planned(text, Machine(guest=True, maps_others=True, home="/home/u")).plan.nodes
    assert not mapped["h1"].cgroup and dict(mapped["r1"].run_dirs)["/run/frr"] == "frr"
    assert machine_root.refused(_planned(text, Machine())) == ()


def test_a_guest_is_refused_what_needs_the_machines_root_from_the_plan(lab_name):
    text = TOPOLOGY.format(name=lab_name).replace("{kind: linux, resources: {memory: 64M}}", "{kind: linux, ports: ['8080:80']}")
    guest = _planned(text.replace("name: ", "allow_host_ports: true\nname: ", 1), Machine(guest=True, maps_others=False))
    with pytest.raises(LabError, match=r"rootless mode cannot make h1 \(ports: .*\): the machine's root can"):
        machine_root.refused(guest)


def test_each_nodes_plan_carries_its_long_name_and_login_through_the_state_record(lab_name):
    made = Lab.from_text(MANAGED.format(name=lab_name), "<text>").blueprint
    lab = made.handed(made.machine, Leases(lab_name))
    again = Blueprint(lab.name, lab.source, {}, planned=Plan.from_json(json.loads(json.dumps(lab.plan.to_json()))))
    for blueprint in (lab, again):  # access reads the plan alone: an empty document changes nothing
        found = {m.node: (m.long, m.login.user, m.login.identity_file, m.login.source) for m in access.managed(blueprint)}
        assert found["a"] == (f"pp-{lab_name}-a", "alice", None, "defaults")
        assert found["b"][:2] == (f"pp-{lab_name}-b", "bob") and found["b"][2].endswith("/keys/id")
