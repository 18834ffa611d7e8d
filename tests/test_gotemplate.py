"""containerlab's Go-template topologies: nestlab's renderer gives what Go's text/template gives, its errors
name the line, and a template with a vars file beside it (or --vars) deploys."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli

from nestlab.engine import state
from nestlab.model.errors import TopologyError
from nestlab.model.formats import gotemplate
from nestlab.model.load import load_file

FIXTURES = ROOT / "tests" / "fixtures"
NOBODY = 65534
GO = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if Path(p).exists()), None)
FEATURES_DATA = {"x": "hi", "y": "  Y  ", "flag": True, "list": ["p", "q"], "m": {"k": "K", "a": 1}, "f": 3.0}


def go_render(template: Path, data, tmp_path: Path) -> str:
    binary = tmp_path / "render"
    if not binary.exists():
        subprocess.run(
            [GO, "build", "-o", str(binary), str(FIXTURES / "gotemplate" / "main.go")],
            check=True,
            env={"HOME": str(tmp_path), "GOCACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "GOFLAGS": "-mod=mod"},
        )
    return subprocess.run([str(binary), str(template), json.dumps(data)], check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(GO is None, reason="needs Go (make deps installs it for the MPT daemon)")
def test_renders_as_go_text_template_does(tmp_path):
    cases = [
        (FIXTURES / "gotemplate" / "features.tmpl", FEATURES_DATA),
        (FIXTURES / "gotemplate" / "features.tmpl", {"x": "ho", "list": ["a", "b"], "flag": False, "other": 1}),
        (FIXTURES / "clab-templates" / "30-bridge-reconcile.clab.yml", None),
        (FIXTURES / "clab-templates" / "30-bridge-reconcile.clab.yml", {"remap": True}),
    ]
    for name in ("templated01", "templated02"):
        data = yaml.safe_load((FIXTURES / "clab-templates" / f"{name}.clab_vars.yaml").read_text())
        cases.append((FIXTURES / "clab-templates" / f"{name}.clab.gotmpl", data))
    for template, data in cases:
        ours = gotemplate.render(template.read_text(), data)
        assert ours == go_render(template, data, tmp_path), (template.name, data)
    # containerlab's own example: 2 spines x 4 leaves, every spine linked to every leaf.
    rendered = yaml.safe_load(
        gotemplate.render((FIXTURES / "clab-templates" / "templated01.clab.gotmpl").read_text(), cases[-2][1])
    )
    assert len(rendered["topology"]["nodes"]) == 6 and len(rendered["topology"]["links"]) == 8


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("a: 1\n{{ if .x }}\nb: 2\n", 2, "not closed"),
        ("a: 1\nb: {{ end }}\n", 2, "without an if"),
        ('a: 1\n\nb: {{ env "HOME" }}\n', 3, "function `env`"),
        ('a: {{ template "t" }}\n', 1, "render the file with containerlab"),
        ("a: {{ range 1.5 }}x{{ end }}\n", 1, "not a list"),
        ("a: {{ (seq 3 }}\n", 1, "unclosed ("),
    ],
)
def test_template_errors_name_the_line(tmp_path, text, line, what):
    path = tmp_path / "t.clab.yml"
    path.write_text("name: t\n" + text)
    with pytest.raises(TopologyError) as caught:
        load_file(path)
    problem = caught.value.problems[0]
    assert problem.line == line + 1 and what in problem.message, problem


TEMPLATE = """name: {{ .name }}
topology:
  nodes:
    sw: {kind: bridge}
{{- range $i := seq 1 .hosts }}
    h{{ $i }}: {}
{{- end }}
  links:
{{- range $i := seq 1 .hosts }}
    - endpoints: ["h{{ $i }}:eth1", "sw:p{{ $i }}"]
      ipv4: ["10.77.0.{{ $i }}/24", null]
{{- end }}
"""


def test_template_deploys_with_its_vars_file_and_with_vars(tmp_path, lab_name):
    (tmp_path / "lab.clab.yml").write_text(TEMPLATE)
    (tmp_path / "lab.clab_vars.yml").write_text(f"name: {lab_name}\nhosts: 3\n")
    (tmp_path / "bigger.yml").write_text(f"name: {lab_name}b\nhosts: 4\n")
    try:
        result = run_cli("deploy", "-t", str(tmp_path / "lab.clab.yml"))
        assert result.returncode == 0 and "rendered as a Go template with variables from" in result.stderr, result.stderr
        assert "1 received" in run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W1", "10.77.0.3").stdout
        result = run_cli("deploy", "-t", str(tmp_path / "lab.clab.yml"), "--vars", str(tmp_path / "bigger.yml"))
        assert result.returncode == 0, result.stderr
        assert "1 received" in run_cli("exec", "--lab", f"{lab_name}b", "h4", "--", "ping", "-c1", "-W1", "10.77.0.1").stdout
    finally:
        for name in (lab_name, f"{lab_name}b"):
            run_cli("destroy", "--lab", name)
    assert lab_name not in state.labs()


def test_a_vars_file_beside_a_template_is_read_only_if_its_author_or_root_owns_it_and_never_through_a_link(tmp_path):
    """Root's template in a folder anyone may write (as /tmp): a vars file another user puts beside it is refused
    naming its owner; a link (even to root's own file, or to /dev/zero) and a FIFO are refused at once, unread;
    root's own, and a user's own beside that user's template, are read; --vars names a file whatever its owner."""
    os.chmod(tmp_path, 0o1777)
    template, beside = tmp_path / "lab.clab.yml", tmp_path / "lab.clab_vars.yml"
    template.write_text("name: {{ .name }}\ntopology:\n  nodes:\n    h1: {kind: linux}\n")
    elsewhere = tmp_path / "roots.yml"
    elsewhere.write_text("name: theirs\n")

    def refused(why: str) -> None:
        with pytest.raises(TopologyError, match=why):
            load_file(template)
        os.unlink(beside)

    beside.write_text("name: planted\n")
    os.chown(beside, NOBODY, NOBODY)
    refused("owned by uid 65534, not by the topology's owner")
    beside.symlink_to(elsewhere)
    refused("a symbolic link")
    beside.symlink_to("/dev/zero")
    refused("a symbolic link")
    os.mkfifo(beside)  # no writer: a plain open would wait for one
    refused("a FIFO")
    beside.write_text("name: mine\n")
    assert load_file(template).topology.name == "mine"
    os.chown(beside, NOBODY, NOBODY)
    assert load_file(template, [beside]).topology.name == "mine"  # named with --vars: the caller's choice
    os.chown(template, NOBODY, NOBODY)
    assert load_file(template).topology.name == "mine"  # nobody's own template and vars
