"""Notices of a large lab, readable: the same note on many nodes (or links) is one line with a count and
the first few names, e.g. ``topology.nodes.*.image: on 50 nodes (n1, n2, n3, ...): ignored: ...``."""

from __future__ import annotations

from .errors import Problem

SHOWN = 3  # names listed in a collapsed note
_SECTIONS = {"nodes": "node", "kinds": "kind", "groups": "group", "links": "link"}


def collapsed(notices: list[Problem]) -> list[Problem]:
    """``notices`` in their order, each set of notes that differ only in the node (kind, group, link) they
    are about made one, at the first's line: its path has ``*`` for the name, its message the count and names."""
    groups: dict[tuple[object, ...], list[Problem]] = {}
    for notice in notices:
        groups.setdefault(_key(notice), []).append(notice)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            out.append(first)
            continue
        section = _SECTIONS[str(first.path[1])]
        names = [f"links[{m.path[2]}]" if section == "link" else str(m.path[2]) for m in members]
        listed = ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
        path = ("topology", "links[*]" if section == "link" else f"{first.path[1]}.*", *first.path[3:])
        out.append(Problem(path, f"on {len(members)} {section}s ({listed}): {first.message}", first.line, first.column))
    return out


def _key(notice: Problem) -> tuple[object, ...]:
    """What a note says, whatever node (kind, group, link) it is about; a note of its own otherwise."""
    path = notice.path
    if len(path) >= 3 and path[0] == "topology" and path[1] in _SECTIONS:
        return ((*path[:2], *path[3:]), notice.message)
    return (id(notice),)
