"""What a node's ``image:`` names: a rootfs directory, a rootfs tarball, an OCI image layout
directory, an image made by ``nestlab image build`` (a bare name), or, with ``runtime: docker``,
a Docker image reference.

Paths are made absolute against the topology file's folder, so a running lab's state
still finds them.  A containerlab-style reference without ``runtime: docker`` is mapped, with a note:

* a general-purpose image such as ``alpine:3``: the node runs as namespaces on this machine's tools
  (for alpine and busybox, with ``ash`` and a do-nothing ``apk add`` first on its PATH: alpine_bin/);
* a server image in :data:`SERVER_IMAGES` such as ``nginx:stable-alpine``: this machine's program of
  that name is the node's ``cmd`` (unless the file gives one), in a root of the node's own, so what
  it writes stays in the node; without the program, Docker runs the image if it has it locally;
* anything else is an error naming ``runtime: docker`` and ``nestlab image build``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..names import IMAGE_ROOT, built, looks_like_path
from ..registry import KINDS, RUNTIMES
from . import files
from .errors import Path as KeyPath
from .errors import Problem
from .modes import kind_defaults
from .schema import Topology, TopologyBody
from .schema.nodes import NodeSpec
from .yamlsource import Located

# General-purpose images whose tools this machine has too: such a node runs as namespaces on the host's files.
ALPINE_BIN = str(Path(__file__).with_name("alpine_bin"))
ALPINE_PATH = f"{ALPINE_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOL_IMAGES = (
    "alpine",
    "python",  # netlab's linux hosts (python:3.13-alpine): this machine's python3
    "busybox",
    "debian",
    "ubuntu",
    "network-multitool",
    "netshoot",
    "centos",
    "fedora",
    "rockylinux",
    "almalinux",
)

# Server images run as this machine's program (Debian package): image -> (program, the image's default cmd, package).
SERVER_IMAGES = {
    "nginx": ("nginx", "nginx -g 'daemon off;'", "nginx"),
    "httpd": ("apache2ctl", "apache2ctl -D FOREGROUND", "apache2"),
    "redis": ("redis-server", "redis-server --protected-mode no", "redis-server"),
}


def _repository(ref: str) -> str:
    """``alpine`` of ``docker.io/library/alpine:3.19@sha256:...``."""
    name = ref.split("@")[0].rsplit("/", 1)[-1]
    return name.split(":")[0]


def resolve_paths(topology: Topology, source: str, located: Located, notices: list[Problem]) -> list[Problem]:
    """Make image paths absolute; a reference that is no local image and has no runtime: docker is dropped with a note."""
    base = Path(source).parent if os.path.exists(source) else Path.cwd()
    body = topology.topology
    _drop_layer_images(body, located, notices)
    problems = []
    for name, spec in body.nodes.items():
        path = (
            ("topology", "nodes", spec.component_of or name)
            + (("components", name.split("/")[1]) if spec.component_of else ())
            + ("image",)
        )
        problem = _resolve_image(body, spec, path, base, located, notices)
        if problem:
            problems.append(problem)
    return problems


def _drop_layer_images(body: TopologyBody, located: Located, notices: list[Problem]) -> None:
    """``defaults`` and ``kinds`` set no image, runtime or resources: dropped, with a note."""
    for path, layer in [
        (("topology", "defaults"), body.defaults),
        *((("topology", "kinds", k), v) for k, v in body.kinds.items()),
    ]:
        if layer.image or layer.runtime or layer.resources:
            notices.append(
                located.problem(
                    path + ("image",),
                    "ignored: image, runtime and resources are set per node, not in defaults or kinds",
                    key=True,
                )
            )
            layer.image = layer.runtime = layer.resources = None


def _resolve_image(
    body: TopologyBody, spec: NodeSpec, path: KeyPath, base: Path, located: Located, notices: list[Problem]
) -> Problem | None:
    """One node's image: a kind's, a path made absolute, a built image, a server or tool image mapped (with a note)."""
    why = RUNTIMES.get(spec.runtime).check(spec) if spec.runtime else None
    if why:
        return located.problem(path[:-1] + ("runtime",), why)
    if spec.runtime == "docker" or not spec.image:  # a Docker image is the engine's to find
        return None
    kind = next((k for k in KINDS.values() for image in k.images if image in spec.image), None)
    if kind and not looks_like_path(spec.image):  # a kind that runs this image itself
        notices.append(
            located.problem(
                path,
                f"image '{spec.image}' runs as kind: {kind.name} ({kind.summary}; set runtime: docker for the image itself)",
                key=True,
            )
        )
        spec.image, spec.kind = None, kind.name
        return None
    if looks_like_path(spec.image):
        return _image_file(spec, path, base, located)
    if built(spec.image).is_dir():
        return None
    if spec.runtime == "runc":
        return located.problem(
            path,
            f"no image named '{spec.image}' (built images: {', '.join(sorted(os.listdir(IMAGE_ROOT))) if os.path.isdir(IMAGE_ROOT) else 'none'}); build it with `nestlab image build {spec.image}` or give a path",
        )
    if _repository(spec.image) in SERVER_IMAGES:
        return _server_image(body, spec, path, located, notices)
    if _repository(spec.image) in TOOL_IMAGES:
        _tool_image(spec, path, located, notices)
        return None
    return located.problem(
        path,
        f"image '{spec.image}' is no local or built image, and not a general-purpose one ({', '.join(TOOL_IMAGES)}) whose tools this "
        f"machine has: set runtime: docker to run it with Docker, or make a root filesystem with `nestlab image build`",
    )


def _image_file(spec: NodeSpec, path: KeyPath, base: Path, located: Located) -> Problem | None:
    """An image given as a path: made absolute against the file's folder; a problem if it does not exist."""
    given = spec.image
    assert given is not None  # asked for an image given as a path
    full = (base / os.path.expanduser(given)).resolve()
    spec.image = str(full)
    if files.exists(full):
        return None
    return located.problem(
        path,
        f"image '{given}' does not exist (looked for {full}); give a rootfs directory, a rootfs tarball or an OCI image layout directory",
    )


def _tool_image(spec: NodeSpec, path: KeyPath, located: Located, notices: list[Problem]) -> None:
    """A general-purpose image: the node runs as namespaces on this machine's tools (alpine's first on its PATH)."""
    notices.append(
        located.problem(
            path,
            f"ignored: image '{spec.image}': the node runs as namespaces with this machine's tools (set runtime: docker to run the image itself)",
            key=True,
        )
    )
    assert spec.image is not None  # asked for an image it maps
    if _repository(spec.image) in ("alpine", "busybox") or "alpine" in spec.image.rpartition(":")[2]:
        spec.env.setdefault("PATH", ALPINE_PATH)
    spec.image = None


def _server_image(body: TopologyBody, spec: NodeSpec, path: KeyPath, located: Located, notices: list[Problem]) -> Problem | None:
    """A server image as this machine's program in a root of the node's own; else Docker's copy of the image."""
    image = spec.image
    assert image is not None  # asked for a server image
    program, cmd, package = SERVER_IMAGES[_repository(image)]
    if shutil.which(program):
        kind = kind_defaults(body, KINDS.canonical(spec.kind or "linux"))
        default = spec.cmd is None and body.defaults.cmd is None and (kind is None or kind.cmd is None)
        notices.append(
            located.problem(
                path,
                f"image '{spec.image}' runs as this machine's {program}"
                + (f" ({cmd})" if default else "")
                + " in a root of the node's own (set runtime: docker to run the image itself)",
                key=True,
            )
        )
        spec.image, spec.own_root = None, True
        if default:
            spec.cmd = cmd
        return None
    if _docker_has(image):
        notices.append(
            located.problem(
                path, f"image '{spec.image}' runs with Docker (this machine has no {program}; Docker has the image)", key=True
            )
        )
        spec.runtime = "docker"
        return None
    return located.problem(
        path,
        f"image '{spec.image}' runs as this machine's {program}, which is not installed: `apt install {package}`, "
        "or set runtime: docker (Docker pulls the image)",
    )


def _docker_has(image: str) -> bool:
    """Docker is running and has ``image`` locally (no pull)."""
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=5).returncode == 0
    except subprocess.TimeoutExpired:
        return False
