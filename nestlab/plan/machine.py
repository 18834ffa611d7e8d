"""What this machine lets a lab be, as one value read once where a command starts (``userns.machine()``,
nestlab/backends/kernel/userns.py) and carried in the lab's blueprint: planning decides cgroups and run
folders from it, and the engine and backends are handed it rather than asking the kernel again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """Whether nestlab runs as the machine's root or as a guest (rootless mode, docs/rootless.md), and for whom."""

    guest: bool = False  # in an ordinary user's namespaces: the machine's network, cgroups and other users out of reach
    maps_others: bool = True  # its user namespace maps more ids than the user's own (daemons may switch users)
    home: str = "/root"  # the user's home folder (a guest's ssh config and keys go under it)

    @property
    def cgroups(self) -> bool:
        """Whether nodes get cgroups (limits, usage) here: the machine's hierarchies are root's alone."""
        return not self.guest

    @property
    def daemons_as_root(self) -> bool:
        """Whether daemons that switch to a user of their own (FRR's frr) run as root instead: a guest whose
        user namespace maps the user alone."""
        return self.guest and not self.maps_others

    @property
    def serves_ssh(self) -> bool:
        """Whether nodes can have an SSH server (sshd sets the session's groups, which one mapped user forbids)."""
        return not self.daemons_as_root


ROOT = Machine()  # the machine's root (or root in a container's or pod's user namespace: its network is its own)
