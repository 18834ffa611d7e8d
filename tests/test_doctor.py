"""`nestlab doctor`, and deploys that need a feature this kernel lacks failing before creating anything."""

from __future__ import annotations

import json

import pytest
from conftest import leftovers, run_cli

from nestlab.backends import probe


def test_doctor_reports_every_feature_with_a_fix():
    result = run_cli("doctor", "--format", "json", check=True)
    features = {f["name"]: f for f in json.loads(result.stdout)}
    for name in (
        "veth",
        "bridge",
        "macvlan",
        "ipvlan",
        "vxlan",
        "htb",
        "netem",
        "mptcp",
        "ovs-kernel",
        "ovs-netdev",
        "iperf3",
        "runc",
        "docker",
    ):
        assert name in features, name
    assert features["veth"]["ok"] and features["bridge"]["ok"]
    for f in features.values():
        assert f["ok"] or f["fix"], f"{f['name']} is missing but doctor gives no fix"
    # What doctor says matches what the kernel does.
    assert features["ipvlan"]["ok"] == probe.kernel()["ipvlan"][0]
    assert leftovers() == []


def test_deploy_needing_a_missing_kernel_feature_fails_up_front(topo_file):
    missing = [name for name in ("ipvlan", "macvlan", "vxlan") if not probe.kernel()[name][0]]
    if not missing:
        pytest.skip("this kernel has ipvlan, macvlan and vxlan; the refusal path cannot be exercised here")
    mode = missing[0]
    option = probe.link_features()[mode].config
    path = topo_file(
        "name: {name}\ntopology:\n  nodes: {a: {}}\n  links:\n"
        f'    - endpoints: ["a:eth1"]\n      mode: {mode}\n      parent: nic0\n'
        if mode != "vxlan"
        else 'name: {name}\nhosts: {x: {}, y: {}}\nwires: [{endpoints: ["x:n0", "y:n0"]}]\n'
        'topology:\n  nodes: {a: {host: x}, b: {host: y}}\n  links: [{endpoints: ["a:v", "b:v"], mode: vxlan}]\n'
    )
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 1
    assert option in result.stderr and "nestlab doctor" in result.stderr and "Nothing was created" in result.stderr
    assert leftovers() == []


def test_deploy_with_netem_params_fails_up_front_without_netem(topo_file):
    if probe.kernel()["netem"][0]:
        pytest.skip("this kernel has netem; the refusal path cannot be exercised here")
    path = topo_file(
        'name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n    - endpoints: ["a:eth1", "b:eth1"]\n      params: {delay: 20ms}\n'
    )
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 1
    assert "CONFIG_NET_SCH_NETEM" in result.stderr and "Nothing was created" in result.stderr, result.stderr
    assert leftovers() == []
