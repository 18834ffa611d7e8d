"""runc: a node on its own filesystem, an OCI bundle whose rootfs is an overlay (the image read-only
below, the node's changes above) and whose network and UTS namespaces are nestlab's pinned ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

from .. import names
from ..errors import LabError
from .base import WithInit, hostname, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..plan.objects import NodeObj
    from ..plugins import Applying


def runc_root(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "runc")


def runc_id(lab: str, node: str) -> str:
    return f"{names.NETNS_PREFIX}{lab}.{node.replace('/', '.')}"


def _bundle(lab: str, node: str) -> str:
    return os.path.join(names.lab_dir(lab), "bundles", node.replace("/", "."))


class Runc(WithInit):
    name = "runc"
    summary = (
        "an OCI bundle on an overlay of image: (rootfs dir, tarball, OCI layout, built image), run by runc (default with image:)"
    )
    needs_image = "runtime: runc needs image: (a rootfs directory, tarball, OCI layout or built image name)"
    own_cgroup = True
    machine_root = "its images unpack as several users and runc runs as the machine's root"

    def start(self, ap: Applying, node: NodeObj, sysctls: dict[str, str]) -> tuple[int, Netlink]:
        from ..backends.kernel import containers, files, libc, rootfs

        if not shutil.which("runc"):
            raise LabError("image: nodes run with runc: install the Debian package runc")
        assert node.image, "the model gives every runc node an image"
        handles = super().start(ap, node, sysctls)
        lab = ap.lab
        bundle = _bundle(lab, node.name)
        merged, upper, work = (os.path.join(bundle, d) for d in ("rootfs", "upper", "work"))
        for d in (merged, upper, work):
            os.makedirs(d, exist_ok=True)
        libc.mount("overlay", merged, 0, "overlay", f"lowerdir={rootfs.resolve(node.image)},upperdir={upper},workdir={work}")
        config = _oci_config(lab, node.name, f"{names.cgroup_name(lab)}/{node.name}/runc", hostname(node), dict(node.env))
        files.write(os.path.join(bundle, "config.json"), json.dumps(config), 0o644, sync=False)
        log = os.path.join(bundle, "runc.log")  # a file, not a pipe: the detached container inherits runc's stdio
        with files.output(log) as out:
            result = subprocess.run(
                ["runc", "--root", runc_root(lab), "run", "--detach", "--bundle", bundle, runc_id(lab, node.name)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        if result.returncode:
            libc.umount(merged)
            with open(log) as fh:
                raise LabError(f"runc could not start node {node.name}: {fh.read().strip()}")
        state = subprocess.run(
            ["runc", "--root", runc_root(lab), "state", runc_id(lab, node.name)], capture_output=True, text=True, check=True
        )
        containers.record_init(lab, node.name, json.loads(state.stdout)["pid"])
        return handles

    def stop(self, lab: str, node: NodeObj) -> None:
        """Delete the node's runc container and its overlay (a missing one is fine)."""
        from ..backends.kernel import libc

        if shutil.which("runc") and os.path.isdir(runc_root(lab)):
            subprocess.run(["runc", "--root", runc_root(lab), "delete", "--force", runc_id(lab, node.name)], capture_output=True)
        bundle = _bundle(lab, node.name)
        libc.umount(os.path.join(bundle, "rootfs"))
        shutil.rmtree(bundle, ignore_errors=True)
        super().stop(lab, node)


# A node's capabilities: a container's usual ones, and the network's and mounts' administration (a node configures both).
_CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_NET_ADMIN",
    "CAP_SYS_CHROOT",
    "CAP_AUDIT_WRITE",
    "CAP_SYS_ADMIN",
)


def _oci_config(lab: str, node: str, cgroup_rel: str, hostname: str, env: dict[str, str]) -> dict[str, Any]:
    """The bundle's config.json: a root process that sleeps (commands enter it), in the node's pinned namespaces."""
    path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    caps = list(_CAPABILITIES)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "cwd": "/",
            "args": ["sleep", "infinity"],
            "env": [path_env, *(f"{k}={v}" for k, v in env.items())],
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": False,
        },
        "root": {"path": "rootfs", "readonly": False},
        "hostname": hostname,
        "mounts": _mounts(),
        "linux": {
            "namespaces": [
                {"type": "network", "path": names.netns_path(lab, node)},
                {"type": "uts", "path": names.uts_path(lab, node)},
                {"type": "pid"},
                {"type": "mount"},
                {"type": "ipc"},
            ],
            "cgroupsPath": "/" + cgroup_rel,
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
            "readonlyPaths": ["/proc/sys/kernel", "/proc/sysrq-trigger"],
        },
    }


def _mounts() -> list[dict[str, Any]]:
    """The container's own /proc, /dev (with pts and shm), read-only /sys and /tmp."""
    return [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        },
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
    ]


register(Runc())
