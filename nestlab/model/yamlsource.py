"""Load YAML into plain data while remembering where every key and item came from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import files
from .errors import Path, Problem, TopologyError


@dataclass
class Located:
    """Plain data (dicts, lists, scalars) plus the 1-based line/column of each path."""

    data: object
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: Path, key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path``'s value (or its key), else of its nearest ancestor that has one."""
        if key and path in self.key_positions:
            return self.key_positions[path]
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.positions:
                return self.positions[path[:cut]]
        return None, None

    def problem(self, path: Path, message: str, key: bool = False) -> Problem:
        line, col = self.where(path, key)
        return Problem(path, message, line, col)


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser keeps the same marks, ~5x faster


def _build(node: yaml.Node, path: Path, loc: Located, loader: yaml.SafeLoader, problems: list[Problem]) -> Any:
    loc.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int)):
                key = str(key)
            if key in out:
                line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                problems.append(Problem(path + (key,), f"duplicate key '{key}' (each key may appear once)", line, col))
                continue
            out[key] = _build(value_node, path + (key,), loc, loader, problems)
            loc.key_positions[path + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, path + (i,), loc, loader, problems) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def read_source(path: str | os.PathLike[str], what: str = "the topology file", stream: bool = False) -> str:
    """A file's text; unreadable or not UTF-8 is a :class:`TopologyError` (the latter with the bad byte's line and column)."""
    return read_owned_source(path, what, stream)[0]


def read_owned_source(
    path: str | os.PathLike[str], what: str = "the topology file", stream: bool = False, follow: bool = True
) -> tuple[str, int | None]:
    """:func:`read_source` and the uid owning the file read (``files.read_owned``): who wrote the lab.  Without
    ``follow``, a symbolic link at ``path`` is refused (a file found in a folder another user may write)."""
    source = str(path)
    try:
        raw, owner = files.read_owned(path, stream=stream, follow=follow)
    except OSError as exc:
        raise TopologyError(source, [Problem((), f"cannot read {what}: {exc.strerror}")]) from None
    try:
        return raw.decode("utf-8"), owner
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TopologyError(
            source, [Problem((), f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x}); save it as UTF-8", line, col)]
        ) from None


def load_yaml(text: str, source: str) -> Located:
    """Parse ``text``; malformed YAML (control characters included) and duplicate keys raise :class:`TopologyError`."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise TopologyError(source, [Problem((), f"malformed YAML: {exc.problem or exc.context}", line, col)]) from None
    except yaml.YAMLError as exc:  # the reader's: a character YAML does not allow, at a position in the text
        position = getattr(exc, "position", 0) or 0
        line, col = text.count("\n", 0, position) + 1, position - (text.rfind("\n", 0, position) + 1) + 1
        char = getattr(exc, "character", None)
        code = ord(char) if isinstance(char, str) else char
        what = (
            f"character {code:#06x} is not allowed in YAML ({getattr(exc, 'reason', 'unacceptable')})"
            if isinstance(code, int)
            else str(exc)
        )
        raise TopologyError(source, [Problem((), f"malformed YAML: {what}; remove it", line, col)]) from None
    finally:
        loader.dispose()
    loc = Located(None)
    if root is None:
        raise TopologyError(source, [Problem((), "the file is empty; a topology needs at least `name:` and `topology:`", 1, 1)])
    problems: list[Problem] = []
    try:
        loc.data = _build(root, (), loc, loader, problems)
    except yaml.MarkedYAMLError as exc:  # a value no safe constructor takes: a tag (!x), a bad timestamp...
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise TopologyError(source, [Problem((), f"malformed YAML: {exc.problem or exc.context}", line, col)]) from None
    if problems:
        raise TopologyError(source, problems)
    return loc
