"""FRR routers: a node's ``frr.conf``, ``daemons`` and ``vtysh.conf`` in its own folder (bound over
/etc/frr in its filesystem view), started the way FRR's init starts them, saved with vtysh.

Debian's ``frr`` package provides the daemons; nothing is installed in the node.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

from ... import names
from ...errors import LabError
from ..kernel import files as kernel_files

INIT = "/usr/lib/frr/frrinit.sh"
DAEMON_DIR = "/usr/lib/frr"
CONFIG_DIR = "/etc/frr"
RUN_DIR = "/run/frr"
USER = "frr"  # the packaged daemons' user
VTY_GROUP = "frrvty"  # FRR requires its daemons' user to be in this group
SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"}
# A protocol named in the configuration -> the daemon that speaks it.
_DAEMONS = (
    (r"^router bgp", "bgpd"),
    (r"^router ospf6", "ospf6d"),
    (r"^router ospf(?!6)", "ospfd"),
    (r"^router rip(?!ng)", "ripd"),
    (r"^router ripng", "ripngd"),
    (r"^router isis", "isisd"),
    (r"^router eigrp", "eigrpd"),
    (r"^router babel", "babeld"),
    (r"^router openfabric", "fabricd"),
    (r"^mpls ldp", "ldpd"),
    (r"^bfd", "bfdd"),
    (r"^(router pim|ip pim)", "pimd"),
    (r"^ip igmp|^ip pim", "pimd"),
    (r"^pbr-map", "pbrd"),
    (r"^vrrp|^ *vrrp ", "vrrpd"),
)
_ALL = (
    "bgpd",
    "ospfd",
    "ospf6d",
    "ripd",
    "ripngd",
    "isisd",
    "pimd",
    "ldpd",
    "nhrpd",
    "eigrpd",
    "babeld",
    "sharpd",
    "pbrd",
    "bfdd",
    "fabricd",
    "vrrpd",
    "pathd",
)

Popen = Callable[..., subprocess.Popen]


def available() -> str | None:
    """Why FRR cannot run here, or None."""
    if not os.path.exists(INIT) or not shutil.which("vtysh"):
        return "kind: frr needs Debian's frr package (apt install frr, or `make deps`)"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return "kind: frr needs the frr user the frr package creates"
    return None


def daemons_for(config: str) -> list[str]:
    """zebra and staticd, plus the daemons of the protocols ``config`` configures."""
    found = {daemon for pattern, daemon in _DAEMONS if re.search(pattern, config, re.MULTILINE)}
    return sorted(found)


def daemons_file(enabled: Sequence[str]) -> str:
    lines = [f"{d}={'yes' if d in enabled else 'no'}" for d in _ALL]
    opts = [f'{d}_options="-A 127.0.0.1"' for d in ("zebra", "staticd", *_ALL)]
    return "\n".join(["# written by nestlab", *lines, "vtysh_enable=yes", *opts, ""]) + "\n"


def write(lab: str, node: str, config: str, hostname: str, user: str = USER) -> str:
    """Write the node's FRR folder, owned by ``user`` (the daemons'); returns it (bound over /etc/frr in the node's
    view).  The daemons may write that folder: each file is written whole by root through no link they planted,
    readable by them alone (0640: the configuration holds the routers' keys)."""
    folder = os.path.join(names.node_dir(lab, node), "etc", "frr")
    if not re.search(r"^hostname ", config, re.MULTILINE):
        config = f"hostname {hostname}\n{config}"
    files = {
        "frr.conf": config if config.endswith("\n") else config + "\n",
        "daemons": daemons_file(daemons_for(config)),
        "vtysh.conf": "service integrated-vtysh-config\n",
    }
    owner = pwd.getpwnam(user)
    with kernel_files.folder(folder, create=0o750) as fd:
        for name, text in files.items():
            kernel_files.write_at(fd, name, text, 0o640, (owner.pw_uid, owner.pw_gid), sync=False)
        os.fchown(fd, owner.pw_uid, owner.pw_gid)
        os.fchmod(fd, 0o750)
    return folder


def save(folder: str, text: str) -> None:
    """``text`` over ``folder``'s frr.conf (``nestlab save``): written whole, owned and moded as the folder's files
    (the daemons'), never through a link a daemon planted there (backends/kernel/files.py)."""
    with kernel_files.folder(folder) as fd:
        kernel_files.write_at(fd, "frr.conf", text, 0o640, kernel_files.owner_of(fd))


def save_to(to: str, node: str, text: str) -> str:
    """``text`` as ``to/NODE/frr.conf`` (``nestlab save --to``), made through no link, owned by whoever owns ``to``
    (who asked for it) and readable by them alone (it holds the router's keys); returns the file's path."""
    with kernel_files.folder(to, create=0o755) as top:
        owner = kernel_files.owner_of(top)
        try:
            os.mkdir(node, 0o755, dir_fd=top)
            os.chown(node, *owner, dir_fd=top, follow_symlinks=False)
        except FileExistsError:
            pass
        fd = kernel_files.open_dir(node, beneath=top)
        try:
            kernel_files.write_at(fd, "frr.conf", text, 0o600, owner)
        finally:
            os.close(fd)
    return os.path.join(to, node, "frr.conf")


def runs_as(user: str) -> list[str]:
    """The daemons' options that run them as ``user`` (none for the packaged frr user).  Another user is root in
    rootless mode, whose user namespace maps no frr user: FRR refuses a user outside its vty group, which ``-g``
    makes that user's group; a daemon that keeps its uid changes no groups (which a user namespace forbids)."""
    return [] if user == USER else ["-u", user, "-g", VTY_GROUP]


# frrinit.sh's ``start`` without its wrappers: zebra, then at once the other daemons its
# /etc/frr/daemons enables (staticd always), each with its ``NAME_options`` (``-d`` returns once the
# daemon is ready; one started before zebra listens would retry only 10 s later), then the
# integrated frr.conf sent once.  The script's arguments (runs_as) go to every daemon.  frrinit.sh
# runs watchfrr, which runs a shell script and a ``vtysh -b`` per daemon; vtysh builds FRR's whole
# command graph each time it starts (about 30 ms of CPU), so that path costs a router four vtysh
# starts where this costs one.
START = f"""
. {CONFIG_DIR}/daemons
[ -n "$MAX_FDS" ] && ulimit -n "$MAX_FDS"
{DAEMON_DIR}/zebra -d $frr_global_options "$@" $zebra_options || {{ echo "zebra did not start"; exit 1; }}
started=
for d in staticd {" ".join(_ALL)}; do
  eval on=\\$$d; [ $d = staticd ] && on=yes
  [ -n "$on" ] && [ "$on" != no ] && [ "$on" != 0 ] && [ -x {DAEMON_DIR}/$d ] || continue
  eval opts=\\${{${{d}}_options}}
  {DAEMON_DIR}/$d -d $frr_global_options "$@" $opts & eval pid_$d=$!
  started="$started $d"
done
for d in $started; do eval wait \\$pid_$d || {{ echo "$d did not start"; exit 1; }}; done
vtysh -b
exit 0
"""


def start(routers: dict[str, tuple[Popen, str]]) -> None:
    """Start every router's FRR inside it (START), all routers at once, each as its user.  A daemon
    that does not start is an error; as with FRR's init, configuration lines the daemons refuse are
    not (vtysh prints them, and the router runs without them)."""
    procs = {
        node: popen(["sh", "-c", START, "start", *runs_as(user)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for node, (popen, user) in routers.items()
    }
    failed = []
    for node, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failed.append(f"{node}: {out.strip()[-300:]}")
    if failed:
        raise LabError("FRR did not start in " + "; ".join(failed))


def running_config(node: str, popen: Popen) -> str:
    proc = popen(["vtysh", "-c", "show running-config"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=30)
    if proc.returncode != 0:
        raise LabError(f"vtysh in {node} failed: {err.strip()[-300:]}")
    return out
