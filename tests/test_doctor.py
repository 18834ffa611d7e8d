"""`nestlab doctor`, and deploys that need a feature this kernel lacks failing before creating anything."""

from __future__ import annotations

import json

import pytest
from conftest import leftovers, run_cli

from nestlab import Lab
from nestlab.backends.kernel import probe
from nestlab.errors import LabError


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


def _hidden(monkeypatch, feature: str) -> None:
    """This kernel as if it lacked ``feature`` (the probe says so; nothing else changes)."""
    real = probe.kernel()
    monkeypatch.setattr(probe, "kernel", lambda: {**real, feature: (False, "Operation not supported")})


@pytest.mark.parametrize("mode", ["ipvlan", "macvlan", "vxlan"])
def test_deploy_needing_a_missing_kernel_feature_fails_up_front(topo_file, monkeypatch, mode):
    _hidden(monkeypatch, mode)
    option = probe.link_features()[mode].config
    path = topo_file(
        'name: {name}\nhosts: {x: {}, y: {}}\nwires: [{endpoints: ["x:n0", "y:n0"]}]\n'
        "topology:\n  nodes: {a: {host: x}, b: {host: y}}\n"
        + (
            '  links: [{endpoints: ["a:v", "b:v"], mode: vxlan}]\n'
            if mode == "vxlan"
            else f'  links: [{{endpoints: ["a:eth1"], mode: {mode}, parent: "x:n0"}}]\n'
        )
    )
    with pytest.raises(LabError) as refused:
        Lab.from_file(path).deploy()
    assert option in str(refused.value) and "nestlab doctor" in str(refused.value) and "Nothing was created" in str(refused.value)
    assert leftovers() == []


def test_deploy_with_netem_params_fails_up_front_without_netem(topo_file, monkeypatch):
    _hidden(monkeypatch, "netem")
    path = topo_file(
        'name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n    - endpoints: ["a:eth1", "b:eth1"]\n      params: {delay: 20ms}\n'
    )
    with pytest.raises(LabError, match=r"CONFIG_NET_SCH_NETEM.*Nothing was created"):
        Lab.from_file(path).deploy()
    assert leftovers() == []
