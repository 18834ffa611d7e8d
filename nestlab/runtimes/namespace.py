"""namespace: the default node, a network and a UTS namespace made in-process (about 1 ms, no fork).

The node shares the machine's filesystem and process table; commands run with ``setns`` into its
namespaces.  Nodes with ``mode: none`` join their host's network namespace and keep a UTS one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Runtime, register

if TYPE_CHECKING:
    pass


class Namespace(Runtime):
    name = "namespace"
    summary = "network + UTS namespaces made in-process, the host's filesystem (default without image:)"


register(Namespace())
