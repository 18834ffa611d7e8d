"""Lab pods' isolation without a cluster: the pod fields render() gives by default, and the uid-map guard a pod's
start script runs, against the maps a runtime may hand it (the k8s tier runs the same on a cluster)."""

from __future__ import annotations

import subprocess

import pytest
from conftest import ROOT

from nestlab import Lab
from nestlab.sites.k8s import isolation
from nestlab.sites.k8s.manifests import render

LAB = """
name: podiso
topology:
  nodes: {a: {}, b: {}}
  links: [{endpoints: ["a:eth1", "b:eth1"]}]
"""

MAPS = {
    "0 1532362752 65536": True,  # what the kubelet hands a pod: its own block of ids
    "0 65536 131072": True,
    "0 0 4294967295": False,  # the node's own namespace: a runtime that ignored hostUsers: false
    "0 100000 65536": False,  # a cluster node that itself runs in a user namespace (rootless kind, LXC)
    "0 1000 1\n1 100000 65536": False,
    "0 0 65536": False,
    "": False,
}


@pytest.mark.parametrize("uid_map", list(MAPS))
def test_the_start_script_deploys_only_in_a_user_namespace_the_kubelet_handed_out(tmp_path, uid_map):
    mapped = tmp_path / "uid_map"
    mapped.write_text(uid_map + "\n")
    script = isolation.guarded("echo DEPLOYED", uid_map=str(mapped))
    ran = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    assert isolation.isolated(uid_map) is MAPS[uid_map]
    if MAPS[uid_map]:
        assert (ran.returncode, ran.stdout.strip()) == (0, "DEPLOYED"), ran
    else:
        assert ran.returncode == isolation.REFUSED and "DEPLOYED" not in ran.stdout, ran
        assert "no node made" in ran.stdout


def test_rendered_lab_pods_are_unprivileged_unless_asked(tmp_path):
    path = tmp_path / "lab.yml"
    path.write_text(LAB)
    lab = Lab.from_file(path)
    for privileged in (False, True):
        manifests, _parts = render(lab.blueprint, 2, "nestlab:test", "default", set(), privileged=privileged)
        pods = [m for m in manifests if m["kind"] == "Pod"]
        assert pods
        for pod in pods:
            context = pod["spec"]["containers"][0]["securityContext"]
            if privileged:
                assert context == {"privileged": True} and "hostUsers" not in pod["spec"]
                continue
            assert pod["spec"]["hostUsers"] is False and context["privileged"] is False
            assert context["capabilities"] == {"drop": ["ALL"], "add": sorted(isolation.CAPABILITIES)}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            assert not pod["spec"].get("hostNetwork") and not pod["spec"].get("hostPID")
            assert not [v for v in pod["spec"].get("volumes", []) if "hostPath" in v]
            assert "uid_map" in " ".join(pod["spec"]["containers"][0]["command"] + pod["spec"]["containers"][0].get("args", []))


def test_the_docs_name_every_capability():
    text = (ROOT / "docs" / "security.md").read_text()
    assert all(cap in text for cap in isolation.CAPABILITIES)
