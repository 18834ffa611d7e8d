"""Memory a lab takes: the kernel's own growth plus the processes inside it.

Kernel memory (slab, kernel stacks, page tables, per-CPU data) holds namespaces, interfaces,
cgroups and tasks; the proportional set size of the lab's processes counts shared library pages
once across them.  MemAvailable, which also moves with the page cache, is too noisy for labs
this small.
"""

from __future__ import annotations

from .. import names
from ..backends.kernel import namespaces
from ..lab.lab import Lab

_KERNEL = ("Slab", "KernelStack", "PageTables", "Percpu")


def kernel_kb() -> int:
    """Kernel memory that namespaces, interfaces, cgroups and processes take (page cache excluded)."""
    with open("/proc/meminfo") as fh:
        fields = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in fh)}
    return sum(fields.get(k, 0) for k in _KERNEL)


def lab_pss_kb(running: Lab) -> int:
    """Proportional set size of every process inside the lab's namespaces."""
    inodes = {namespaces.inode(names.netns_path(running.name, n)) for n in running.plan.nodes}
    total = 0
    for pid in namespaces.pids_in({i for i in inodes if i}):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total
