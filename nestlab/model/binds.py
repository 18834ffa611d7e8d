"""A node's own filesystem view: ``binds:`` checked and made absolute, an FRR router's
``startup-config`` read (a file beside the topology, or the text itself).

A bind's source must exist.  A destination the machine lacks outside /run and /tmp (the node's own
tmpfs) gives the node a root of its own (backends/views.py): a view never creates paths on the machine's disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..names import HIDDEN
from ..registry import KINDS
from . import files
from .bind import MODES, Bind
from .errors import Path as KeyPath
from .errors import Problem
from .modes import kind_defaults, node_kind
from .schema import Topology
from .schema.nodes import NodeSpec
from .yamlsource import Located, read_source

_NEVER = ("/", "/proc", "/sys", "/dev", *HIDDEN)


def resolve_binds(topology: Topology, source: str, located: Located, notices: list[Problem]) -> list[Problem]:
    """Each node's binds checked and made absolute, and its startup-config read (problems returned, notices added)."""
    base = Path(source).parent if os.path.exists(source) else Path.cwd()
    problems: list[Problem] = []
    for name, spec in topology.topology.nodes.items():
        if spec.component_of:
            continue
        path = ("topology", "nodes", name)
        kind = node_kind(topology, name)
        if spec.binds and (spec.image or (spec.runtime or "namespace") != "namespace"):
            problems.append(
                located.problem(
                    path + ("binds",),
                    "binds need the default runtime (namespace): a node with image: has a root filesystem of its own",
                )
            )
            continue
        problems += _binds(spec, kind, base, path, located)
        problems += _startup_config(topology, spec, kind, base, path, located, notices)
    return problems


def _binds(spec: NodeSpec, kind: str, base: Path, path: KeyPath, located: Located) -> list[Problem]:
    """The node's binds, absolute (a router's frr.conf bound over its config file read as its startup-config)."""
    problems, kept = [], []
    for i, bind in enumerate(spec.binds):
        where = path + ("binds", i)
        if not bind.valid:
            problems.append(located.problem(where, f"'{bind}' is not src:dst[:{'|'.join(MODES)}]"))
            continue
        src = (base / os.path.expanduser(bind.source)).resolve()
        dst = os.path.normpath(bind.target)
        if not files.exists(src):
            problems.append(located.problem(where, f"bind source '{bind.source}' does not exist (looked for {src})"))
        elif not os.path.isabs(bind.target) or dst in _NEVER or dst.startswith(tuple(h + "/" for h in HIDDEN)):
            problems.append(
                located.problem(
                    where,
                    f"bind destination '{bind.target}' is not allowed: give an absolute path other than /, /proc, /sys, /dev, /run/netns, /run/nestlab",
                )
            )
        elif dst == KINDS.get(kind).config_file and not spec.startup_config:
            spec.startup_config = read_source(src, "the router's frr.conf")  # so `nestlab save` can write it back
        else:
            kept.append(Bind.of(str(src), dst, bind.mode))
    spec.binds = kept
    return problems


def _startup_config(
    topology: Topology, spec: NodeSpec, kind: str, base: Path, path: tuple[str, ...], located: Located, notices: list[Problem]
) -> list[Problem]:
    """The node's startup-config (its own, its kind's defaults', the defaults'): a file's text read, or the text."""
    if KINDS.get(kind).config_file and "startup_config" not in spec.model_fields_set:  # its kind's, else defaults'
        layers = (kind_defaults(topology.topology, kind), topology.topology.defaults)
        spec.startup_config = next((x.startup_config for x in layers if x and x.startup_config is not None), None)
    if spec.startup_config is None:
        return []
    if KINDS.get(kind).config_file is None:
        takers = " or ".join(k.name for k in KINDS.values() if k.config_file)
        notices.append(
            located.problem(path + ("startup-config",), f"ignored: startup-config is for kind: {takers} nodes", key=True)
        )
        spec.startup_config = None
    elif "\n" not in spec.startup_config:
        file = (base / os.path.expanduser(spec.startup_config)).resolve()
        if files.is_file(file):
            spec.startup_config = read_source(file, "the startup-config")
        elif "/" in spec.startup_config or spec.startup_config.endswith((".conf", ".cfg", ".txt")):
            return [
                located.problem(
                    path + ("startup-config",), f"startup-config '{spec.startup_config}' does not exist (looked for {file})"
                )
            ]
    return []
