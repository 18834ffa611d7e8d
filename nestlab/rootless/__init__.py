"""Labs without root (docs/rootless.md): an ordinary user's labs live in a user namespace of the user's own, held by
one small process per user (holder.py), in a view of the machine where nestlab's paths are the user's (view.py);
each command joins it before it runs and leaves it after (session.py)."""

from __future__ import annotations

import os


def ordinary_user(argv: list[str]) -> bool:
    """Whether an ordinary user (not root, not yet in its own namespaces) runs this command line, for more than its
    help: its labs are rootless mode's (the command runs in the user's namespaces, or is refused)."""
    return os.geteuid() != 0 and not {"--help", "-h"} & set(argv)
