"""Containers beyond a network namespace: an init process per node, entered through its PID.

* ``isolated`` (a nested component): PID, mount and IPC namespaces of its own on top of
  the network and UTS namespaces nestlab pins; PID 1 is ``tini`` (reaps orphans) with
  ``/proc`` remounted for the new PID namespace.  No daemon, two small processes.
* ``runc``: an OCI bundle whose rootfs is an overlay (image read-only below, the node's
  changes above) and whose network and UTS namespaces are nestlab's pinned ones.
* ``docker``: ``docker run --network none``; nestlab pins the container's namespaces
  and wires them like any node's (as pipework did).

Commands run in such a node by entering the init's namespaces from a short-lived
thread (so the caller's namespaces never change) and joining the node's cgroup
before ``exec``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence

from .. import names
from ..errors import LabError
from . import libc, namespaces

_ENTER = (("ipc", libc.CLONE_NEWIPC), ("uts", libc.CLONE_NEWUTS), ("net", libc.CLONE_NEWNET), ("pid", libc.CLONE_NEWPID), ("mnt", libc.CLONE_NEWNS))


def _init_command(cgroup_files: Sequence[str]) -> str:
    """PID 1 of a component: joins its cgroup, mounts its /proc, then tini (reaps orphans) keeps a
    sleep alive.  Static builds when present (about 50 KiB less private memory each).  Joining from
    the shell, whose mount namespace still shows the cgroup filesystem, lets Python start it with
    vfork rather than fork (a ``preexec_fn`` forces fork: ~25 ms per component instead of ~3)."""
    tini = "tini-static" if shutil.which("tini-static") else "tini"
    sleep = "busybox sleep" if shutil.which("busybox") else "sleep"
    join = "".join(f"echo 0 > {f} && " for f in cgroup_files)
    return f"{join}mount -t proc proc /proc && exec {tini} -s -- {sleep} infinity"


def _joiner(cgroup_files: Sequence[str]) -> tuple[Callable[[], None] | None, list[int]]:
    """A ``preexec_fn`` that moves the new process into its cgroup(s) before it runs anything.

    The files are opened now, in the caller's mount namespace: the child may be in one
    (a container's) where the cgroup filesystem is not visible.  Close the fds afterwards.
    """
    if not cgroup_files:
        return None, []
    fds = [os.open(f, os.O_WRONLY | os.O_CLOEXEC) for f in cgroup_files]

    def join() -> None:
        for fd in fds:
            os.write(fd, b"0")

    return join, fds


def _popen(cgroup_files: Sequence[str], args: Sequence[str], **kwargs) -> subprocess.Popen:
    join, fds = _joiner(cgroup_files)
    try:
        return subprocess.Popen(args, preexec_fn=join, **kwargs)
    finally:
        for fd in fds:
            os.close(fd)


def _in_thread(work: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """Run ``work`` in a fresh thread (namespace changes die with it) and return its result."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="nestlab-enter")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def popen_in(netns: str, uts: str, cgroup_files: Sequence[str], args: Sequence[str], **kwargs) -> subprocess.Popen:
    """Start a process in a plain node's network and UTS namespaces, inside its cgroup."""
    with namespaces.entered(netns, uts):
        return _popen(cgroup_files, args, **kwargs)


def spawn(init_pid: int, cgroup_files: Sequence[str], args: Sequence[str], **kwargs) -> subprocess.Popen:
    """Start a process in every namespace of ``init_pid`` (PID and mount included) and the given cgroups."""

    def work() -> subprocess.Popen:
        fds: list[int] = []
        join, cgroup_fds = _joiner(cgroup_files)
        try:
            for kind, _flag in _ENTER:
                fds.append(os.open(f"/proc/{init_pid}/ns/{kind}", os.O_RDONLY))
            libc.unshare(libc.CLONE_FS)  # a thread may change its mount namespace only with its own fs state
            for fd, (_kind, flag) in zip(fds, _ENTER):
                libc.setns(fd, flag)
            return subprocess.Popen(args, preexec_fn=join, **kwargs)
        finally:
            for fd in fds + cgroup_fds:
                os.close(fd)

    return _in_thread(work)


def start_isolated(lab: str, node: str, cgroup_files: Sequence[str]) -> int:
    """Give a node its own PID, mount and IPC namespaces: start its init (PID 1) and record it."""

    command = _init_command(cgroup_files)

    def work() -> subprocess.Popen:
        with namespaces.entered(names.netns_path(lab, node), names.uts_path(lab, node)):
            libc.unshare(libc.CLONE_NEWPID | libc.CLONE_NEWNS | libc.CLONE_NEWIPC)  # NEWNS implies our own fs state
            libc.mount("", "/", libc.MS_REC | libc.MS_PRIVATE, "none")  # nothing mounted inside leaks out
            return subprocess.Popen(
                ["sh", "-c", command], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )

    if not shutil.which("tini"):
        raise LabError("components need tini as their PID 1: install the Debian package tini")
    proc = _in_thread(work)
    _record(lab, node, proc.pid)
    return proc.pid


def _record(lab: str, node: str, pid: int) -> None:
    path = names.init_pid_path(lab, node)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(str(pid))


def init_pid(lab: str, node: str) -> int | None:
    """The PID of a container node's init, if it has one and it is alive."""
    try:
        with open(names.init_pid_path(lab, node)) as fh:
            pid = int(fh.read())
        os.stat(f"/proc/{pid}/ns/net")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def forget(lab: str, node: str) -> None:
    try:
        os.unlink(names.init_pid_path(lab, node))
    except FileNotFoundError:
        pass


# -- runc -----------------------------------------------------------------------------
def runc_root(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "runc")


def runc_id(lab: str, node: str) -> str:
    return f"nestlab.{lab}.{node.replace('/', '.')}"


def _bundle(lab: str, node: str) -> str:
    return os.path.join(names.lab_dir(lab), "bundles", node.replace("/", "."))


def start_runc(lab: str, node: str, rootfs: str, cgroup_rel: str, hostname: str, env: dict[str, str]) -> int:
    """Run the node on its own filesystem: overlay on ``rootfs``, joined to the node's pinned namespaces."""
    if not shutil.which("runc"):
        raise LabError("image: nodes run with runc: install the Debian package runc")
    bundle = _bundle(lab, node)
    merged, upper, work = (os.path.join(bundle, d) for d in ("rootfs", "upper", "work"))
    for d in (merged, upper, work):
        os.makedirs(d, exist_ok=True)
    libc.mount("overlay", merged, 0, "overlay", f"lowerdir={rootfs},upperdir={upper},workdir={work}")
    config = _oci_config(lab, node, cgroup_rel, hostname, env)
    with open(os.path.join(bundle, "config.json"), "w") as fh:
        json.dump(config, fh)
    log = os.path.join(bundle, "runc.log")  # a file, not a pipe: the detached container inherits runc's stdio
    with open(log, "w") as out:
        result = subprocess.run(
            ["runc", "--root", runc_root(lab), "run", "--detach", "--bundle", bundle, runc_id(lab, node)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
    if result.returncode:
        libc.umount(merged)
        with open(log) as fh:
            raise LabError(f"runc could not start node {node}: {fh.read().strip()}")
    state = json.loads(subprocess.run(["runc", "--root", runc_root(lab), "state", runc_id(lab, node)], capture_output=True, text=True, check=True).stdout)
    _record(lab, node, state["pid"])
    return state["pid"]


def _oci_config(lab: str, node: str, cgroup_rel: str, hostname: str, env: dict[str, str]) -> dict:
    path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
            "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE", "CAP_SYS_ADMIN"]
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": 0, "gid": 0}, "cwd": "/",
            "args": ["sleep", "infinity"],
            "env": [path_env, *(f"{k}={v}" for k, v in env.items())],
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": False,
        },
        "root": {"path": "rootfs", "readonly": False},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
        ],
        "linux": {
            "namespaces": [
                {"type": "network", "path": names.netns_path(lab, node)},
                {"type": "uts", "path": names.uts_path(lab, node)},
                {"type": "pid"}, {"type": "mount"}, {"type": "ipc"},
            ],
            "cgroupsPath": "/" + cgroup_rel,
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
            "readonlyPaths": ["/proc/sys/kernel", "/proc/sysrq-trigger"],
        },
    }


def stop_runc(lab: str, node: str) -> None:
    """Delete the node's runc container and its overlay (a missing one is fine)."""
    if shutil.which("runc") and os.path.isdir(runc_root(lab)):
        subprocess.run(["runc", "--root", runc_root(lab), "delete", "--force", runc_id(lab, node)], capture_output=True)
    bundle = _bundle(lab, node)
    libc.umount(os.path.join(bundle, "rootfs"))
    shutil.rmtree(bundle, ignore_errors=True)
    forget(lab, node)


# -- docker -------------------------------------------------------------------------------
def docker_name(lab: str, node: str) -> str:
    return runc_id(lab, node)


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    if not shutil.which("docker"):
        raise LabError("runtime: docker needs the docker client (Debian package docker.io) and a running engine")
    result = subprocess.run(["docker", *args], capture_output=True, text=True)
    if check and result.returncode:
        raise LabError(f"docker {args[0]}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def start_docker(lab: str, node: str, image: str, cgroup_parent: str, hostname: str, env: dict[str, str]) -> int:
    """``docker run --network none`` the node; returns its PID (its namespaces are then pinned as the node's)."""
    if _docker("version", "--format", "{{.Server.Version}}", check=False).returncode:
        raise LabError("runtime: docker needs a reachable Docker engine (set DOCKER_HOST or start dockerd)")
    args = ["run", "--detach", "--name", docker_name(lab, node), "--network", "none", "--hostname", hostname,
            "--cgroup-parent", "/" + cgroup_parent, "--init", "--label", f"nestlab.lab={lab}",
            *(x for k, v in env.items() for x in ("--env", f"{k}={v}")), "--entrypoint", "sleep", image, "infinity"]
    _docker(*args)
    pid = int(_docker("inspect", "--format", "{{.State.Pid}}", docker_name(lab, node)).stdout.strip())
    _record(lab, node, pid)
    return pid


def stop_docker(lab: str, node: str) -> None:
    if shutil.which("docker"):
        subprocess.run(["docker", "rm", "--force", docker_name(lab, node)], capture_output=True)
    forget(lab, node)


def remove_docker_leftovers(lab: str) -> None:
    """Remove every container nestlab started for ``lab`` (found by label), for cleanup."""
    if not shutil.which("docker"):
        return
    result = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nestlab.lab={lab}"], capture_output=True, text=True)
    if result.returncode == 0 and result.stdout.split():
        subprocess.run(["docker", "rm", "--force", *result.stdout.split()], capture_output=True)
