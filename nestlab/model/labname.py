"""A lab's name from its file, and nothing else: what ``destroy -t FILE`` needs (as containerlab's, it
destroys a lab whose file no longer checks, e.g. one naming an interface this machine lost)."""

from __future__ import annotations

import os
from pathlib import Path as FsPath

from .errors import TopologyError
from .formats import clab, kathara
from .yamlsource import load_yaml, read_source


def name_of(path: str | os.PathLike[str]) -> str:
    """The ``name:`` of a topology file (rendered first if it is a Go template), or a Kathará lab's."""
    if kathara.is_lab(path):
        located, _source, _notes, _author = kathara.load(path)
        data = located.data
        assert isinstance(data, dict)  # a Kathará lab reads as a mapping, its name in it
        return str(data["name"])
    text = read_source(FsPath(path), stream=True)
    if clab.template_line(text) is not None:
        from .load import load_file  # the template needs its variables: the whole file, checked

        return load_file(path).topology.name
    located = load_yaml(clab.expand_env(text), str(path))
    name = located.data.get("name") if isinstance(located.data, dict) else None
    if not isinstance(name, str) or not name:
        raise TopologyError(
            str(path),
            [located.problem(("name",) if isinstance(located.data, dict) else (), "the lab needs a name: (name: NAME)")],
        )
    return name
