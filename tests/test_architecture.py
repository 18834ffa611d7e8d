"""The layout keeps its promises (docs/architecture.md): one-way layers, no import circles, node kinds,
link modes and runtimes are plug-ins the schema, the docs and the CLI offer, kind names are compared
only by the kinds themselves, the plug-ins' seams are typed, and ruff finds nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

from conftest import ROOT, run_cli

from nestlab.model.modes import option_owners
from nestlab.model.schema.links import LinkSpec
from nestlab.model.schema.nodes import NodeSpec
from nestlab.registry import KINDS, LINK_MODES, RUNTIMES

PACKAGE = ROOT / "nestlab"
BIN = Path(sys.executable).parent
# Readers and writers of other tools' formats speak those tools' kind names (containerlab, Kathará, netlab).
FOREIGN = {"model/formats/clab.py", "model/formats/kathara.py", "model/formats/gotemplate.py"}


def test_the_layer_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts (the layers of docs/architecture.md), checked by import-linter."""
    result = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_no_import_circles():
    """No module of nestlab reaches itself through its imports (any import: at the top, in a function,
    or for the type checker only), by grimp's graph."""
    import grimp

    graph = grimp.build_graph("nestlab", cache_dir=None)
    circles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(module + ".") or module.startswith(imported + "."):
                continue  # a package and its own modules
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                circles.add(" -> ".join((module, *chain)))
    assert not circles, "\n".join(sorted(circles))


def test_reading_a_topology_loads_no_kernel_code():
    """The schema and the loader (with every plug-in's declarations) import nothing of nestlab.backends."""
    code = "import sys, nestlab.model.load; print(sorted(m for m in sys.modules if m.startswith('nestlab.backends')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]", result.stdout


def test_the_schema_offers_what_the_registries_hold():
    assert set(get_args(get_args(LinkSpec.model_fields["mode"].annotation)[0])) == set(LINK_MODES.words())
    assert set(get_args(get_args(NodeSpec.model_fields["runtime"].annotation)[0])) == {
        r.name for r in RUNTIMES.values() if r.selectable
    }
    written = {w for w in KINDS.words() if not KINDS.get(w).machine}
    assert set(get_args(get_args(NodeSpec.model_fields["kind"].annotation)[0])) == written
    for key in option_owners():
        assert key in LinkSpec.model_fields, key
    for kind in KINDS.values():
        for key in kind.options:
            assert key in NodeSpec.model_fields, key


def test_every_plug_in_is_documented_and_listed():
    modes_doc = (ROOT / "docs" / "modes.md").read_text()
    for name in LINK_MODES.names():
        assert f"| `{name}`" in modes_doc, f"docs/modes.md has no row for mode {name}"
        assert LINK_MODES.get(name).summary, name
    kinds_doc = (ROOT / "docs" / "kinds.md").read_text()
    for kind in KINDS.values():
        assert f"| `{kind.name}`" in kinds_doc, f"docs/kinds.md has no row for kind {kind.name}"
        assert kind.summary, kind.name
    listing = json.loads(run_cli("modes", "--format", "json", check=True).stdout)
    assert [m["mode"] for m in listing["modes"]] == LINK_MODES.names()
    assert {r["runtime"] for r in listing["runtimes"]} == set(RUNTIMES.names())
    assert [k["kind"] for k in listing["kinds"]] == KINDS.names()
    nesting = (ROOT / "docs" / "nesting.md").read_text() + (ROOT / "docs" / "architecture.md").read_text()
    for name in RUNTIMES.names():
        assert f"`{name}`" in nesting, f"runtime {name} is not documented"


def _kind_comparisons(path: Path) -> list[str]:
    """``x.kind == "ovs"``, ``kind in ("bridge", "ovs")``: a comparison of something named kind with a kind's word."""
    words = set(KINDS.words())
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        constants = {
            c.value for side in sides for c in ast.walk(side) if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        if constants & words and any("kind" in ast.unparse(side) for side in sides):
            where = path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_kinds_compare_kind_names():
    """Outside nestlab/kinds and the foreign-format readers, code asks a kind what it is (KINDS.get(k).switch), never its name."""
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith("kinds/") and str(path.relative_to(PACKAGE)) not in FOREIGN
        for hit in _kind_comparisons(path)
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_a_kind_comparison(tmp_path):
    """The check above is not blind: it finds the forms it is for."""
    sample = tmp_path / "sample.py"
    sample.write_text('def f(obj, kind):\n    return obj.kind == "ovs" or kind in ("bridge", "linux")\n')
    assert len(_kind_comparisons(sample)) == 2


def _lab_parameters_not_a_name(path: Path) -> list[str]:
    """Parameters named ``lab`` that are not a lab's name: annotated other than ``str`` / ``str | None``, or not at all."""
    found = []
    for func in ast.walk(ast.parse(path.read_text())):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for arg in func.args.posonlyargs + func.args.args + func.args.kwonlyargs:
                annotation = ast.unparse(arg.annotation) if arg.annotation else None
                if arg.arg == "lab" and annotation not in ("str", "str | None"):
                    found.append(
                        f"{path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name}:{arg.lineno} lab: {annotation}"
                    )
    return found


def test_a_parameter_named_lab_is_a_labs_name():
    """One word, one meaning: ``lab`` is a lab's name (a str); a Blueprint is ``blueprint``, a Lab ``running`` or ``lab_obj``."""
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _lab_parameters_not_a_name(path)]
    assert not found, "\n".join(found)


def test_the_check_finds_a_lab_that_is_not_a_name(tmp_path):
    """The check above is not blind: a Blueprint, a Lab and an unannotated ``lab`` are each found; a name is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def a(lab: Blueprint): ...\ndef b(*, lab: Lab): ...\ndef c(lab): ...\ndef d(lab: str, e: str | None = None): ...\n"
        "def f(lab: str | None = None): ...\n"
    )
    assert [hit.split(" ", 1)[1] for hit in _lab_parameters_not_a_name(sample)] == ["lab: Blueprint", "lab: Lab", "lab: None"]


def test_the_plug_in_seams_type_check():
    """mypy, strict on every package pyproject.toml's [tool.mypy] lists (all but the CLI and a few modules it names)."""
    result = subprocess.run([str(BIN / "mypy")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]


def test_ruff_finds_nothing():
    """ruff's lint and format, at the project's configured rules and line length."""
    for args in (["check", "nestlab", "tests", "benchmarks"], ["format", "--check", "nestlab", "tests", "benchmarks"]):
        result = subprocess.run([str(BIN / "ruff"), *args], capture_output=True, text=True, cwd=ROOT)
        assert result.returncode == 0, " ".join(args) + "\n" + result.stdout[-4000:] + result.stderr[-1000:]


def _sources() -> dict[str, str]:
    return {str(path.relative_to(PACKAGE)): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def test_each_question_has_one_home():
    """Where a lab runs is read in engine/where.py alone; the topology's data is the Lab's own; the mount
    table is read and /proc scanned (a process's stat parsed) by one module each; the interface-name
    rule is names.py's; ``NODE:IFACE`` is split where it is read (the model, its endpoint type and the
    foreign formats), never again downstream."""
    sources = _sources()

    def holding(*needles: str) -> set[str]:
        return {name for name, text in sources.items() if any(n in text for n in needles)}

    assert holding("site.json", "where.RECORD") <= {"engine/where.py"}
    assert holding("._raw") == {"lab/lab.py"}
    assert holding("/proc/self/mountinfo", "/proc/self/mounts", "/proc/mounts") == {"backends/kernel/mounts.py"}
    assert holding('scandir("/proc")', 'listdir("/proc")') == {"backends/kernel/procs.py"}
    assert holding('}/stat"') == {"backends/kernel/procs.py"}  # a process's /proc/PID/stat
    assert holding("{0,14}", "[:15]", "<= 15") == set()  # an interface name's limit is names.IFNAMSIZ
    splits = ('partition(":")', 'split(":", 1)', "partition(':')", "split(':', 1)")
    other_colons = {"bench/results.py", "bench/memory.py", "backends/remote/oci.py"}  # /proc's "key: value", an image's tag
    downstream = {name for name in holding(*splits) if not name.startswith("model/")} - other_colons
    assert downstream == set(), downstream


def test_each_command_loads_its_own_module():
    """cli/app.py's COMMANDS names, for each command, the module defining it and its help's first paragraph: `nestlab
    --help` lists them from the table and imports no command's module, `nestlab deploy` loads cli/lifecycle.py and what
    it imports, not every command's module.  A command missing from the table, put under the wrong module or listed
    with another help than its own fails."""
    code = (
        "import importlib, json, typer.main\n"
        "from nestlab.cli.app import COMMANDS\n"
        "held = {}\n"
        "for module in sorted({m for m, _ in COMMANDS.values()}):\n"
        "    group = typer.main.get_group(importlib.import_module('nestlab.cli.' + module).commands)\n"
        "    for name, command in group.commands.items():\n"
        "        held[name] = [module, None if command.hidden else ' '.join(command.help.split(chr(10) * 2)[0].split())]\n"
        "print(json.dumps({'held': held, 'table': COMMANDS}))"
    )
    found = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout)
    assert found["held"] == found["table"]
    for args, want, never in (
        (["--help"], set(), {"nestlab.cli.lifecycle", "nestlab.cli.use", "nestlab.cli.bench"}),
        (["inspect", "--help"], {"nestlab.cli.use"}, {"nestlab.cli.lifecycle", "nestlab.cli.bench", "nestlab.cli.k8s"}),
        (["deploy", "--help"], {"nestlab.cli.lifecycle"}, {"nestlab.cli.use", "nestlab.cli.bench", "nestlab.cli.k8s"}),
    ):
        probe = (
            f"import sys\nsys.argv = ['nestlab', *{args!r}]\nfrom nestlab.cli import app\n"
            "try:\n    app.build()()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('nestlab.cli.')), file=sys.stderr)"
        )
        shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
        modules = set(ast.literal_eval(shown.stderr.splitlines()[-1]))
        assert want <= modules and not never & modules, (args, modules)


# Functions nothing in nestlab/ names, and why each is there: hooks their library calls by name, the Python API,
# and the seams' type checks.
CALLED_FROM_OUTSIDE = {
    "connection_made": "asyncio calls a protocol's hooks (backends/services/portfwd.py)",
    "datagram_received": "asyncio calls a protocol's hooks (backends/services/portfwd.py)",
    "log_message": "http.server calls a handler's hooks (observe/live.py)",
    "do_GET": "http.server calls a handler's hooks (observe/live.py)",
    "do_POST": "http.server calls a handler's hooks (observe/live.py)",
    "format_commands": "click calls a group's hooks (cli/app.py)",
    "add_wire": "the Python API (Lab.add_wire, docs/python-api.md)",
    "_is_a_site": "mypy holds each site to the seam through it (sites/*.py, under TYPE_CHECKING)",
}
_REGISTERED = {"command", "callback", "field_validator", "model_validator", "register"}  # a decorator that hands it on


def _named(paths: list[Path]) -> set[str]:
    """Every name the code at ``paths`` refers to: variables, attributes, imported names."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.alias):
                found.add(node.name.rsplit(".", 1)[-1])
    return found


def _unnamed_functions(root: Path, named: set[str]) -> dict[str, str]:
    """Functions and methods under ``root`` that ``named`` never names (nor a decorator registers), by name: where."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("__"):
                continue
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            if node.name not in named and not {getattr(d, "attr", getattr(d, "id", "")) for d in decorators} & _REGISTERED:
                found[node.name] = f"{path.relative_to(root)}:{node.lineno}"
    return found


def test_no_function_is_called_by_tests_alone():
    """Every function of nestlab/ is named somewhere in nestlab/ (or registered by a decorator), but for the few
    CALLED_FROM_OUTSIDE: code only tests call, or nothing calls, is dead code."""
    unnamed = _unnamed_functions(PACKAGE, _named(sorted(PACKAGE.rglob("*.py"))))
    tests = _named(sorted((ROOT / "tests").rglob("*.py")))
    dead = {f"{where} {name}" + (" (only tests call it)" if name in tests else "") for name, where in unnamed.items()}
    assert not {name for name in unnamed if name not in CALLED_FROM_OUTSIDE}, sorted(
        d for d in dead if d.split()[1] not in CALLED_FROM_OUTSIDE
    )
    assert set(CALLED_FROM_OUTSIDE) <= set(unnamed), "CALLED_FROM_OUTSIDE names a function nestlab/ calls: drop it"


def test_the_dead_code_check_finds_a_function_only_tests_call(tmp_path):
    (tmp_path / "mod.py").write_text("def used():\n    pass\n\n\ndef tested():\n    used()\n")
    assert _unnamed_functions(tmp_path, _named([tmp_path / "mod.py"])) == {"tested": "mod.py:5"}


def _write_opens(path: Path) -> list[str]:
    """``open(..., "w")``, ``os.fdopen(fd, "a")``: a file opened to write by the builtin (not through files.py)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or ast.unparse(node.func) not in ("open", "os.fdopen", "io.open"):
            continue
        given = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        mode = given.value if isinstance(given, ast.Constant) else "r" if given is None else "?"
        if set(str(mode)) & set("wax+?"):
            found.append(f"{path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name}:{node.lineno}")
    return found


def test_files_are_written_through_files_py():
    """A file is written through backends/kernel/files.py (whole and replaced, through no planted link; in place for
    what the kernel or a bind mount owns; a log or a record appended): no raw write-mode ``open`` elsewhere."""
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "backends/kernel/files.py"
        for hit in _write_opens(path)
    ]
    assert found == []


def test_the_check_finds_a_raw_write(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('import os\nopen("a", "w")\nopen("b")\nopen("c", mode="ab")\nos.fdopen(3, "w")\nopen("d", "rb")\n')
    assert _write_opens(sample) == ["sample.py:2", "sample.py:4", "sample.py:5"]


def test_the_machine_is_read_at_the_engines_entry():
    """What this machine lets nestlab do is read by engine/handout.py (``machine()``, handed out in a blueprint) and
    nowhere else calls ``userns.machine()``."""
    readers = {
        name
        for name, text in _sources().items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("userns.machine", "kernel.userns.machine")
    }
    assert readers == {"engine/handout.py"}


def test_no_function_is_over_complexity_12():
    """ruff's C901 (mccabe), at pyproject.toml's max-complexity: a function that branches more is split."""
    result = subprocess.run([str(BIN / "ruff"), "check", "--select", "C901", "nestlab"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]
    assert "max-complexity = 12" in (ROOT / "pyproject.toml").read_text()


def _option_lists(path: Path) -> list[tuple[str, frozenset[str]]]:
    """A command's options written inline (``x = typer.Option(...)`` parameters) and each literal list of words."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
            written = [
                a.arg for a, d in zip(args, defaults) if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("Option")
            ]
            if written:
                found.append((f"{path.name}:{node.lineno} {node.name}()", frozenset(written)))
        elif isinstance(node, ast.Set | ast.Tuple | ast.List) and node.elts:
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(words) == len(node.elts):
                found.append((f"{path.name}:{node.lineno}", frozenset(words)))
    return found


def _repeated(lists: list[tuple[str, frozenset[str]]], least: int = 8) -> list[str]:
    return [
        f"{wa} and {wb}: {sorted(a & b)}" for i, (wa, a) in enumerate(lists) for wb, b in lists[i + 1 :] if len(a & b) >= least
    ]


def test_no_option_list_is_written_twice():
    """A command's options are written once (``link set``'s in cli/link_options.py, read by the full command and the
    quick path; options two commands share as module constants): no two lists of the CLI share eight names."""
    lists = [found for path in sorted((PACKAGE / "cli").rglob("*.py")) for found in _option_lists(path)]
    assert _repeated(lists) == []


def test_the_check_finds_an_option_list_written_twice(tmp_path):
    sample = tmp_path / "sample.py"
    names = ["rate", "burst", "queue", "delay", "jitter", "loss", "corrupt", "mtu"]
    params = ", ".join(f"{n}=typer.Option(None)" for n in names)
    sample.write_text(f"def set_it({params}): ...\nQUICK = {set(names)!r}\nSHARED = (typer.Option(None),)\n")
    assert len(_repeated(_option_lists(sample))) == 1
