"""What a node's ``image:`` names: a rootfs directory, a rootfs tarball, an OCI image layout
directory, an image made by ``nestlab image build`` (a bare name), or, with ``runtime: docker``,
a Docker image reference.

Paths are made absolute against the topology file's folder, so a running lab's state
still finds them.  A containerlab-style reference to a general-purpose image such as ``alpine:3``
without ``runtime: docker`` is ignored with a note (the node runs as namespaces on this machine's
tools); any other reference is an error naming ``runtime: docker`` and ``nestlab image build``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import runtimes
from ..backends.rootfs import IMAGE_ROOT, built, looks_like_path
from .errors import Problem
from .schema import Topology
from .yamlsource import Located


FRR_IMAGE = "frrouting/frr"  # docker.io/frrouting/frr:v8.4.1, quay.io/frrouting/frr:...
# General-purpose images whose tools this machine has too: such a node runs as namespaces on the host's files.
TOOL_IMAGES = ("alpine", "busybox", "debian", "ubuntu", "network-multitool", "netshoot", "centos", "fedora", "rockylinux", "almalinux")


def _repository(ref: str) -> str:
    """``alpine`` of ``docker.io/library/alpine:3.19@sha256:...``."""
    name = ref.split("@")[0].rsplit("/", 1)[-1]
    return name.split(":")[0]


def resolve_paths(topology: Topology, source: str, located: Located, notices: list[Problem]) -> list[Problem]:
    """Make image paths absolute; a reference that is no local image and has no runtime: docker is dropped with a note."""
    base = Path(source).parent if os.path.exists(source) else Path.cwd()
    problems = []
    body = topology.topology
    for path, layer in [(("topology", "defaults"), body.defaults), *((("topology", "kinds", k), v) for k, v in body.kinds.items())]:
        if layer.image or layer.runtime or layer.resources:
            notices.append(located.problem(path + ("image",), "ignored: image, runtime and resources are set per node, not in defaults or kinds", key=True))
            layer.image = layer.runtime = layer.resources = None
    for name, spec in body.nodes.items():
        path = ("topology", "nodes", spec.component_of or name) + (("components", name.split("/")[1]) if spec.component_of else ()) + ("image",)
        why = runtimes.get(spec.runtime).check(spec) if spec.runtime else None
        if why:
            problems.append(located.problem(path[:-1] + ("runtime",), why))
            continue
        if spec.runtime == "docker" or not spec.image:  # a Docker image is the engine's to find
            continue
        if FRR_IMAGE in spec.image and not looks_like_path(spec.image):
            notices.append(located.problem(path, f"image '{spec.image}' runs as kind: frr (Debian's FRR in the node's own filesystem view; set runtime: docker for the image itself)", key=True))
            spec.image, spec.kind = None, "frr"
            continue
        if looks_like_path(spec.image):
            full = (base / os.path.expanduser(spec.image)).resolve()
            if not full.exists():
                problems.append(located.problem(path, f"image '{spec.image}' does not exist (looked for {full}); give a rootfs directory, a rootfs tarball or an OCI image layout directory"))
            spec.image = str(full)
        elif built(spec.image).is_dir():
            continue
        elif spec.runtime == "runc":
            problems.append(located.problem(path, f"no image named '{spec.image}' (built images: {', '.join(sorted(os.listdir(IMAGE_ROOT))) if os.path.isdir(IMAGE_ROOT) else 'none'}); build it with `nestlab image build {spec.image}` or give a path"))
        elif _repository(spec.image) in TOOL_IMAGES:
            notices.append(located.problem(path, f"ignored: image '{spec.image}': the node runs as namespaces with this machine's tools (set runtime: docker to run the image itself)", key=True))
            spec.image = None
        else:
            problems.append(located.problem(path, f"image '{spec.image}' is no local or built image, and not a general-purpose one ({', '.join(TOOL_IMAGES)}) whose tools this "
                                                  f"machine has: set runtime: docker to run it with Docker, or make a root filesystem with `nestlab image build`"))
    return problems
