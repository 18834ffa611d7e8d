"""docker: ``docker run --network none`` the node's image; nestlab pins the container's network and UTS
namespaces and wires them like any node's (as pipework did).  Containers carry the label
``nestlab.lab=LAB``, by which cleanup finds them."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from .. import names
from ..errors import LabError
from .base import WithInit, hostname, register
from .runc import runc_id

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..plan.objects import NodeObj
    from ..plugins import Applying


def docker_name(lab: str, node: str) -> str:
    return runc_id(lab, node)


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    if not shutil.which("docker"):
        raise LabError("runtime: docker needs the docker client (Debian package docker.io) and a running engine")
    result = subprocess.run(["docker", *args], capture_output=True, text=True)
    if check and result.returncode:
        raise LabError(f"docker {args[0]}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class Docker(WithInit):
    name = "docker"
    summary = "a Docker container of image: (a Docker image reference), wired by nestlab"
    needs_image = "runtime: docker needs image: (a Docker image such as debian:bookworm)"
    own_cgroup = True
    machine_root = "Docker's daemon is the machine's root's"

    def start(self, ap: Applying, node: NodeObj, sysctls: dict[str, str]) -> tuple[int, Netlink]:
        from ..backends.kernel import containers, namespaces

        assert node.image, "the model gives every docker node an image"
        lab = ap.lab
        if _docker("version", "--format", "{{.Server.Version}}", check=False).returncode:
            raise LabError("runtime: docker needs a reachable Docker engine (set DOCKER_HOST or start dockerd)")
        args = [
            "run",
            "--detach",
            "--name",
            docker_name(lab, node.name),
            "--network",
            "none",
            "--hostname",
            hostname(node),
            "--cgroup-parent",
            f"/{names.cgroup_name(lab)}/{node.name}",
            "--init",
            "--label",
            f"nestlab.lab={lab}",
            *(x for k, v in node.env for x in ("--env", f"{k}={v}")),
            "--entrypoint",
            "sleep",
            node.image,
            "infinity",
        ]
        _docker(*args)
        pid = int(_docker("inspect", "--format", "{{.State.Pid}}", docker_name(lab, node.name)).stdout.strip())
        containers.record_init(lab, node.name, pid)
        return namespaces.adopt(pid, ap.path(node.name), names.uts_path(lab, node.name), sysctls)

    def stop(self, lab: str, node: NodeObj) -> None:
        if shutil.which("docker"):
            subprocess.run(["docker", "rm", "--force", docker_name(lab, node.name)], capture_output=True)
        super().stop(lab, node)

    def remove_leftovers(self, lab: str) -> None:
        """Every container nestlab started for ``lab``, found by label."""
        if not shutil.which("docker"):
            return
        result = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nestlab.lab={lab}"], capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.split():
            subprocess.run(["docker", "rm", "--force", *result.stdout.split()], capture_output=True)


register(Docker())
