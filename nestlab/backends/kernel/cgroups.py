"""cgroups v1 and v2: one directory per lab, node and component, limits written, usage read.

Layout (under every v1 hierarchy, or once under the v2 root)::

    nestlab.LAB/NODE              the node's limits; its processes when it has no components
    nestlab.LAB/NODE/self         the node's own processes when it has components (v2 allows
                                  processes only in leaves)
    nestlab.LAB/NODE/COMPONENT    a component: a child, so the node's limits bound it

``cpus`` is a CFS quota over a 100 ms period; ``cpu_shares`` maps to v2's
``cpu.weight`` by the kernel's own formula; ``memory`` also forbids swap where the
kernel accounts it, so a hog is OOM-killed rather than swapped.
"""

from __future__ import annotations

import errno
import os
import time

from ... import names
from ...errors import LabError
from ...model.units import parse_size
from . import files, mounts

ROOT = "/sys/fs/cgroup"
PERIOD_US = 100_000
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids", "cpuset")
V2_CONTROLLERS = ("cpu", "memory", "pids", "cpuset")
SELF = "self"


def version() -> int:
    return 2 if os.path.exists(os.path.join(ROOT, "cgroup.controllers")) else 1


def _v1_mounts() -> dict[str, str]:
    """controller -> mount point of its v1 hierarchy."""
    found: dict[str, str] = {}
    for mount in mounts.cgroups():
        for opt in mount.options if mount.fstype == "cgroup" else ():
            if opt in V1_CONTROLLERS:
                found.setdefault(opt, mount.point)
    return found


def hierarchies() -> list[str]:
    """The mount points nestlab's cgroups live under (one for v2)."""
    if version() == 2:
        return [ROOT]
    return sorted(set(_v1_mounts().values()))


def _write(path: str, value: str | int) -> None:
    try:
        files.in_place(path, str(value))
    except OSError as exc:
        raise LabError(f"cannot write {value} to {path}: {exc.strerror}") from None


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


class Tree:
    """The cgroups of one lab."""

    def __init__(self, lab: str):
        self.lab = lab
        self.v2 = version() == 2
        self.mounts = {c: ROOT for c in V2_CONTROLLERS} | {"cpuacct": ROOT} if self.v2 else _v1_mounts()

    def _rel(self, node: str) -> str:
        return os.path.join(names.cgroup_name(self.lab), node)

    def path(self, controller: str, node: str) -> str:
        mount = self.mounts.get(controller)
        if mount is None:
            raise LabError(f"this machine has no cgroup {controller} controller mounted; see `nestlab doctor`")
        return os.path.join(mount, self._rel(node))

    def leaf(self, node: str, has_children: bool) -> str:
        """The cgroup (relative to the lab's) a node's own processes join."""
        return f"{node}/{SELF}" if has_children else node

    def procs_files(self, leaf: str) -> list[str]:
        return [os.path.join(mount, self._rel(leaf), "cgroup.procs") for mount in sorted(set(self.mounts.values()))]

    def create(self, node: str, resources: dict[str, str], has_children: bool) -> None:
        """Make the node's (or component's) cgroup and its process leaf, and set its limits."""
        chain = ["", *self._parents(node), node, *([f"{node}/{SELF}"] if has_children else [])]
        for mount in sorted(set(self.mounts.values())):
            base = os.path.join(mount, names.cgroup_name(self.lab))
            for rel in chain:
                path = os.path.join(base, rel) if rel else base
                if self.v2:  # a v2 controller works in a cgroup only when its parent hands it down
                    self._enable(os.path.dirname(path))
                if not os.path.isdir(path):
                    os.mkdir(path)
                    if not self.v2 and os.path.exists(os.path.join(path, "cpuset.cpus")):
                        self._inherit_cpuset(path)
        self.set(node, resources)

    @staticmethod
    def _parents(node: str) -> list[str]:
        parts = node.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    def _enable(self, path: str) -> None:
        available = _read(os.path.join(path, "cgroup.controllers")).split()
        enabled = _read(os.path.join(path, "cgroup.subtree_control")).split()
        wanted = [c for c in V2_CONTROLLERS if c in available and c not in enabled]
        if wanted:
            _write(os.path.join(path, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))

    @staticmethod
    def _inherit_cpuset(path: str) -> None:
        parent = os.path.dirname(path)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not _read(os.path.join(path, name)):
                _write(os.path.join(path, name), _read(os.path.join(parent, name)))

    def set(self, node: str, resources: dict[str, str]) -> None:
        """Write limits; a key given as ``"none"`` lifts that limit."""
        for key, value in resources.items():
            lift = value in (None, "none")
            if key == "cpus":
                quota = -1 if lift else max(1000, round(float(value) * PERIOD_US))
                if self.v2:
                    _write(self._file("cpu", node, "cpu.max"), f"{'max' if lift else quota} {PERIOD_US}")
                else:
                    _write(self._file("cpu", node, "cpu.cfs_period_us"), PERIOD_US)
                    _write(self._file("cpu", node, "cpu.cfs_quota_us"), quota)
            elif key == "cpu_shares":
                shares = 1024 if lift else int(value)
                if self.v2:
                    _write(self._file("cpu", node, "cpu.weight"), 1 + ((shares - 2) * 9999) // 262142)
                else:
                    _write(self._file("cpu", node, "cpu.shares"), shares)
            elif key == "memory":
                limit = "max" if lift else parse_size(value)
                if self.v2:
                    _write(self._file("memory", node, "memory.max"), limit)
                    if os.path.exists(self._file("memory", node, "memory.swap.max")):
                        _write(self._file("memory", node, "memory.swap.max"), "max" if lift else 0)
                else:
                    _write(self._file("memory", node, "memory.limit_in_bytes"), -1 if lift else limit)
                    if os.path.exists(self._file("memory", node, "memory.memsw.limit_in_bytes")):
                        _write(self._file("memory", node, "memory.memsw.limit_in_bytes"), -1 if lift else limit)
            elif key == "pids":
                _write(self._file("pids", node, "pids.max"), "max" if lift else int(value))
            elif key == "cpuset":
                cpus = _read(
                    os.path.join(
                        os.path.dirname(self.path("cpuset", node)), "cpuset.cpus" if not self.v2 else "cpuset.cpus.effective"
                    )
                )
                _write(self._file("cpuset", node, "cpuset.cpus"), cpus if lift else value)
            else:
                raise LabError(f"unknown resource '{key}' (cpus, cpu_shares, memory, pids, cpuset)")

    def _file(self, controller: str, node: str, name: str) -> str:
        return os.path.join(self.path(controller, node), name)

    def usage(self, node: str) -> dict[str, float]:
        """CPU seconds used and memory in use now (bytes), the node's components included."""
        try:
            if self.v2:
                stat = dict(line.split() for line in _read(self._file("cpu", node, "cpu.stat")).splitlines())
                cpu = int(stat["usage_usec"]) / 1e6
                memory = int(_read(self._file("memory", node, "memory.current")))
            else:
                cpu = int(_read(self._file("cpuacct", node, "cpuacct.usage"))) / 1e9
                memory = int(_read(self._file("memory", node, "memory.usage_in_bytes")))
        except (FileNotFoundError, LabError):
            return {}
        return {"cpu_s": cpu, "memory_bytes": memory}

    def limits(self, node: str) -> dict[str, str]:
        """The limits in force, read back from the kernel."""
        out: dict[str, str] = {}
        try:
            if self.v2:
                quota, period = _read(self._file("cpu", node, "cpu.max")).split()
                out["cpus"] = "max" if quota == "max" else f"{int(quota) / int(period):g}"
                out["memory"] = _read(self._file("memory", node, "memory.max"))
            else:
                quota_us = int(_read(self._file("cpu", node, "cpu.cfs_quota_us")))
                period_us = int(_read(self._file("cpu", node, "cpu.cfs_period_us")))
                out["cpus"] = "max" if quota_us < 0 else f"{quota_us / period_us:g}"
                mem = int(_read(self._file("memory", node, "memory.limit_in_bytes")))
                out["memory"] = "max" if mem >= 1 << 62 else str(mem)
            out["pids"] = _read(self._file("pids", node, "pids.max"))
        except (FileNotFoundError, LabError):
            pass
        return out

    def remove(self, node: str | None = None, timeout: float = 2.0) -> None:
        """Remove a node's cgroups (all of the lab's with ``None``), deepest first, once their processes are gone
        (not asked in rootless mode: the machine's cgroups of that name are another's)."""
        for mount in sorted(set(self.mounts.values())):
            top = (
                os.path.join(mount, names.cgroup_name(self.lab), node)
                if node
                else os.path.join(mount, names.cgroup_name(self.lab))
            )
            remove_tree(top, timeout)


def remove_tree(top: str, timeout: float = 2.0) -> None:
    """rmdir a cgroup and its children, deepest first; waits briefly for exiting processes."""
    if not os.path.isdir(top):
        return
    dirs = [root for root, _subdirs, _files in os.walk(top)]
    deadline = time.monotonic() + timeout
    for path in sorted(dirs, key=lambda p: p.count("/"), reverse=True):
        while True:
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise LabError(
                        f"cannot remove cgroup {path}: {exc.strerror} (processes still in it: {_read(os.path.join(path, 'cgroup.procs')).split()})"
                    ) from None
                time.sleep(0.02)


def files_of(pid: int) -> list[str]:
    """The ``cgroup.procs`` files of the cgroups process ``pid`` is in (one per hierarchy), to join it."""
    files = []
    v2 = version() == 2
    mounts = {} if v2 else _v1_mounts()
    with open(f"/proc/{pid}/cgroup") as fh:
        for line in fh:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            if v2 and _id == "0":
                files.append(os.path.join(ROOT, path.lstrip("/"), "cgroup.procs"))
            elif not v2 and (ctrl := next((c for c in controllers.split(",") if c in mounts), None)):
                files.append(os.path.join(mounts[ctrl], path.lstrip("/"), "cgroup.procs"))
    return sorted(set(files))


def lab_cgroups() -> dict[str, list[str]]:
    """Every nestlab cgroup on this machine, by lab: what cleanup removes and the test suite checks (not asked in
    rootless mode: none is the user's)."""
    found: dict[str, list[str]] = {}
    for mount in hierarchies():
        try:
            entries = os.listdir(mount)
        except OSError:
            continue
        for entry in entries:
            if entry.startswith(names.NETNS_PREFIX) and os.path.isdir(os.path.join(mount, entry)):
                found.setdefault(entry.removeprefix(names.NETNS_PREFIX), []).append(os.path.join(mount, entry))
    return found
