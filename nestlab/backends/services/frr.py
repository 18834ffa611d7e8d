"""FRR routers: a node's ``frr.conf`` and ``vtysh.conf`` in its own folder (bound over /etc/frr in its
filesystem view), started the way FRR's init starts them, saved with vtysh.

That folder is the daemons' (user ``frr``): they may write any file of it.  So root reads nothing there that it
runs or sources: the daemons to start and their options (``daemons``), ``vtysh.conf`` and the copy of
``frr.conf`` that root's ``vtysh -b`` reads are written by root, on every start, into a folder of root's alone
(:func:`boot_dir`), bound read-only at :data:`BOOT_DIR` in the node's view (docs/security.md).

Debian's ``frr`` package provides the daemons; nothing is installed in the node.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import selectors
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from ... import names
from ...errors import LabError
from ...model import files as model_files
from ..kernel import files as kernel_files

INIT = "/usr/lib/frr/frrinit.sh"
DAEMON_DIR = "/usr/lib/frr"
CONFIG_DIR = "/etc/frr"
RUN_DIR = "/run/frr"
BOOT_DIR = "/run/nestlab-frr"  # in the node's view: root's copy of what FRR starts from (boot_dir), read-only
MAX_CONFIG = 16 * 1024 * 1024  # a router's frr.conf as its daemons left it, copied for vtysh -b
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

Popen = Callable[..., subprocess.Popen[Any]]


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


VTYSH_CONF = "service integrated-vtysh-config\n"


def folder_of(lab: str, node: str) -> str:
    """The daemons' own folder, bound over /etc/frr in the node's view."""
    return os.path.join(names.node_dir(lab, node), "etc", "frr")


def boot_dir(lab: str, node: str) -> str:
    """Root's folder (0700) of what FRR starts from, bound read-only at :data:`BOOT_DIR` in the node's view."""
    return os.path.join(names.node_dir(lab, node), "frr-boot")


def write(lab: str, node: str, config: str, hostname: str, user: str = USER) -> str:
    """Write the node's FRR folder, owned by ``user`` (the daemons'); returns it (bound over /etc/frr in the node's
    view).  The daemons may write that folder: each file is written whole by root through no link they planted,
    readable by them alone (0640: the configuration holds the routers' keys)."""
    folder = folder_of(lab, node)
    if not re.search(r"^hostname ", config, re.MULTILINE):
        config = f"hostname {hostname}\n{config}"
    files = {"frr.conf": config if config.endswith("\n") else config + "\n", "vtysh.conf": VTYSH_CONF}
    owner = pwd.getpwnam(user)
    with kernel_files.folder(folder, create=0o750) as fd:
        for name, text in files.items():
            kernel_files.write_at(fd, name, text, 0o640, (owner.pw_uid, owner.pw_gid), sync=False)
        with contextlib.suppress(FileNotFoundError):  # an older nestlab's, which root sourced: no longer read
            os.unlink("daemons", dir_fd=fd)
        os.fchown(fd, owner.pw_uid, owner.pw_gid)
        os.fchmod(fd, 0o750)
    kernel_files.make_dirs(boot_dir(lab, node), 0o700)  # bound into the view, so there before the node starts
    return folder


def boot(lab: str, node: str, config: str, binds: Sequence[tuple[str, str, bool]] = ()) -> None:
    """Root's start files of the router, written anew before each start (deploy, ``node start``): the daemons its
    planned ``config`` names (and those a ``daemons`` file the topology binds turns on, its options and any other
    line ignored) with nestlab's options, root's own ``vtysh.conf``, and a copy of the ``frr.conf`` the node sees
    (the daemons' as they or ``nestlab save`` left it, or the one the topology binds) read bounded, regular and,
    in the daemons' folder, through no link.  A LabError if that file is not one."""
    own = folder_of(lab, node)
    try:
        text = _seen(own, "frr.conf", binds)
        wanted = set(daemons_for(config)) | enabled_in((_seen(own, "daemons", binds, bound_only=True) or b"").decode())
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise LabError(f"{node}: its /etc/frr is not used: {why} (nestlab deploy --reconfigure writes it anew)") from None
    files: dict[str, bytes | str] = {"daemons": daemons_file(sorted(wanted)), "vtysh.conf": VTYSH_CONF, "frr.conf": text or b""}
    with kernel_files.folder(boot_dir(lab, node), create=0o700) as fd:
        os.fchmod(fd, 0o700)
        for name, data in files.items():
            kernel_files.write_at(fd, name, data, 0o600, sync=False)


def _seen(own: str, name: str, binds: Sequence[tuple[str, str, bool]], bound_only: bool = False) -> bytes | None:
    """The content of /etc/frr/NAME as the node sees it: the file a bind of the topology puts there (the last one
    naming it or its folder), else the daemons' own (``own``) unless ``bound_only``; None where there is none."""
    source = None
    for given, target, _read_only in binds:
        where = os.path.normpath(target)
        if where == os.path.join(CONFIG_DIR, name):
            source = given
        elif where == CONFIG_DIR and os.path.normpath(given) != own:
            source = os.path.join(given, name)
    if source is not None:
        return model_files.read_bytes(source, MAX_CONFIG) if os.path.lexists(source) else None
    if bound_only:
        return None
    with kernel_files.folder(own) as fd:  # the daemons may have put anything there
        return model_files.read_bytes(name, MAX_CONFIG, dir_fd=fd, follow=False)


def enabled_in(daemons: str) -> set[str]:
    """The daemons a ``daemons`` file turns on (``bgpd=yes``): parsed, never run, and nothing else of it used."""
    on = re.finditer(r"^\s*([a-z0-9]+)=[\"']?(yes|1)[\"']?\s*$", daemons, re.MULTILINE)
    return {found[1] for found in on if found[1] in _ALL}


def vtysh(*args: str) -> list[str]:
    """vtysh as root runs it in a router: reading root's copies (:data:`BOOT_DIR`), never the daemons' folder."""
    return ["vtysh", "--config_dir", BOOT_DIR, *args]


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


# frrinit.sh's ``start`` without its wrappers: zebra, then at once the other daemons root's copy of
# its ``daemons`` file enables (BOOT_DIR, never the daemons' own /etc/frr; staticd always), each with
# its ``NAME_options`` (``-d`` returns once the daemon is ready; one started before zebra listens would
# retry only 10 s later), then root's copy of the integrated frr.conf sent once.  The script's
# arguments (runs_as) go to every daemon.  frrinit.sh runs watchfrr, which runs a shell script and a
# ``vtysh -b`` per daemon; vtysh builds FRR's whole command graph each time it starts (about 30 ms of
# CPU), so that path costs a router four vtysh starts where this costs one.
START = f"""
. {BOOT_DIR}/daemons
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
vtysh --config_dir {BOOT_DIR} -b
exit 0
"""


def start(routers: dict[str, tuple[Popen, str]]) -> None:
    """Start every router's FRR inside it (START), all routers at once, each as its user.  A daemon
    that does not start is an error; as with FRR's init, configuration lines the daemons refuse are
    not (vtysh prints them, and the router runs without them)."""
    procs = {
        node: popen(["sh", "-c", START, "start", *runs_as(user)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for node, (popen, user) in routers.items()
    }
    failed = []
    for node, proc in procs.items():
        out, _ = _said(proc, f"FRR's start in {node}", 120)
        if proc.returncode != 0:
            failed.append(f"{node}: {out.strip()[-300:]}")
    if failed:
        raise LabError("FRR did not start in " + "; ".join(failed))


def running_config(node: str, popen: Popen) -> str:
    proc = popen(vtysh("-c", "show running-config"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = _said(proc, f"vtysh in {node}", 30)
    if proc.returncode != 0:
        raise LabError(f"vtysh in {node} failed: {err.strip()[-300:]}")
    return out


def _said(proc: subprocess.Popen[bytes], what: str, timeout: float, limit: int = MAX_CONFIG) -> tuple[str, str]:
    """``proc``'s standard output and error (as text), waited for: at most ``limit`` bytes of the two within
    ``timeout`` seconds, else it is killed and refused.  What vtysh prints is what the daemons answer it, and a
    taken-over daemon (``frr``) may answer without end."""
    kept = {pipe: bytearray() for pipe in (proc.stdout, proc.stderr) if pipe is not None}
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as waiting:
            for pipe in kept:
                waiting.register(pipe, selectors.EVENT_READ)
            while waiting.get_map():
                if time.monotonic() > deadline:
                    raise LabError(f"{what}: no end after {timeout:.0f} s")
                for key, _ in waiting.select(deadline - time.monotonic()):
                    chunk = os.read(key.fd, 1 << 16)
                    kept[key.fileobj] += chunk  # type: ignore[index]
                    if not chunk:
                        waiting.unregister(key.fileobj)
                    elif sum(map(len, kept.values())) > limit:
                        raise LabError(f"{what}: more than {limit // (1 << 20)} MiB of output, not read further")
        proc.wait(max(0.1, deadline - time.monotonic()))
    except (LabError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
        raise
    out, err = (bytes(kept[pipe]).decode("utf-8", "replace") if pipe in kept else "" for pipe in (proc.stdout, proc.stderr))
    return out, err
