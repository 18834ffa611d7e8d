"""Remove a lab by its markers: its namespaces, its pinned mounts, tools left working on its folder, its state directory."""

from __future__ import annotations

import os
import signal
import time

from .. import names
from ..backends.kernel import cgroups, files, mounts, namespaces, netlink, procs, rtdump
from ..registry import RUNTIMES
from . import etc_hosts, handout, login_uids


def marked_namespaces(lab: str | None = None) -> list[str]:
    """Paths of ``/run/netns`` entries owned by ``lab`` (or by any lab)."""
    if not os.path.isdir(names.NETNS_DIR):
        return []
    return sorted(
        e.path for e in os.scandir(names.NETNS_DIR) if (owner := names.lab_of_netns(e.name)) and (lab is None or owner == lab)
    )


def _release_mgmt(lab: str) -> None:
    """Give back the lab's management addresses; the last lab on a network takes its bridge and rules along."""
    from ..backends.kernel import mgmtleases, mgmtnet

    for network in mgmtleases.networks_of(lab):
        with mgmtleases.locked(network):
            if mgmtleases.release(network, lab):
                mgmtnet.remove(network)


def _mounts_under(prefix: str) -> list[str]:
    return [p for p in mounts.points() if p.startswith(prefix)]


def _tools_of(lab: str) -> list[int]:
    """Processes outside the lab's namespaces that work on its folder (their command line names it): a tool
    a killed deploy left running (an ``ovs-vsctl`` waits up to 30 s for a switch that is gone), the SSH gate.
    Only this user namespace's: a lab of that name in an ordinary user's (rootless) is that user's own."""
    folder = os.fsencode(names.lab_dir(lab) + "/")
    mine = procs.namespace(os.getpid(), "user")
    return [pid for pid in procs.others() if folder in procs.cmdline(pid) and procs.namespace(pid, "user") == mine]


def _kill_tools_of(lab: str) -> None:
    for pid in _tools_of(lab):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone meanwhile
            continue


def left(lab: str) -> list[str]:
    """What of ``lab`` is still on this machine: namespaces, its folder, mounts, processes working in it,
    cgroups and interfaces of this machine carrying its marker (empty once it is gone)."""
    folder = names.lab_dir(lab)
    found = [f"namespace {p}" for p in marked_namespaces(lab)]
    found += [f"folder {folder}"] if os.path.exists(folder) else []
    found += [f"mount {p}" for p in _mounts_under(folder + "/")]
    found += [f"process {pid}" for pid in _tools_of(lab)]
    found += [f"cgroup {p}" for p in cgroups.lab_cgroups().get(lab, [])] if handout.machine().cgroups else []
    found += [f"interface {name}" for name in rtdump.marked(lab)]
    return found


def remove_here(lab: str, folder_too: bool = False) -> int:
    """Remove everything marked as ``lab``'s on this machine (what its site has elsewhere is the site's:
    ``Site.remove``); returns how many namespaces went.  ``folder_too``: also the lab directory beside its
    file (clab-LAB/)."""
    for runtime in RUNTIMES.values():
        runtime.remove_leftovers(lab)
    paths = marked_namespaces(lab)
    udir = names.uts_dir(lab)
    if os.path.isdir(udir):
        paths += [e.path for e in os.scandir(udir)]
    _remove_interfaces(lab)  # ends in this machine's namespace (host:IF): before the namespaces, so none outlives destroy
    _kill_tools_of(lab)
    login_uids.kill(lab)  # before its keys folder (the uids) goes with etc_hosts.withdraw
    aliases, hosts_damaged = etc_hosts.withdraw(lab, folder_too)  # `ip netns` names pin the namespaces too: unpinned with them
    namespaces.remove_pinned(paths + aliases)
    _remove_interfaces(lab, management=True)  # gone with their nodes, in one batch
    _release_mgmt(lab)
    for point in _mounts_under(names.lab_dir(lab) + "/"):
        namespaces.unpin(point)
    if handout.machine().cgroups:  # rootless mode's labs have none; the machine's of that name are another's
        cgroups.Tree(lab).remove()
    # Last: the folder holds the lock; a deploy of the same lab waiting for it starts only when all is gone.
    files.remove_tree(names.lab_dir(lab))
    try:
        os.rmdir(names.STATE_ROOT)  # only when no other lab is left
    except OSError:
        pass
    if hosts_damaged:
        raise hosts_damaged
    return len([p for p in paths if p.startswith(names.NETNS_DIR)])


def _remove_interfaces(lab: str, management: bool = False) -> None:
    """Delete the lab's marked interfaces in this machine's own namespace (a veth's peer goes with it):
    the ends of ``host:IF`` links, or (``management``) what is left of its management veths once the
    kernel had up to 10 s to take them away with their nodes' namespaces, as it does in one batch (one
    by one, each veth deleted waits for an RCU grace period: 2 000 took 8 s)."""
    from ..links.mgmt import is_host_end

    def marked() -> list[str]:
        return [name for name in rtdump.marked(lab) if is_host_end(name) == management]

    found = marked()
    deadline = time.monotonic() + (10 if management else 0)
    while found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = marked()
    if not found:
        return
    nl = netlink.Netlink()
    try:
        for name in found:
            try:
                nl.run(netlink.del_link(name))
            except netlink.NetlinkError:  # already gone with its peer's namespace
                pass
    finally:
        nl.close()
