"""The container images a lab on Kubernetes runs, built here from this checkout (no registry is asked).

``nestlab`` has three layers, each cached under ``/var/cache/nestlab/k8s/layers`` by what it holds:

* a Debian base (debootstrap minbase with Python, iproute2, ping, iperf3, libpcap, FRR), by suite and packages;
* nestlab's dependencies (pip, from pyproject.toml, less matplotlib: plots are drawn where nestlab is
  run from, not in the pods; with the ``k8s`` extra, the client the operator's pod runs), by their list;
* nestlab itself (this checkout's package, compiled), by the content of its files.

``pause`` holds each pod's namespaces: k8s/pause/main.go, built by ``make k8s``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable

from ..backends.kernel import files
from ..backends.remote import oci
from ..errors import LabError
from ..sites.k8s.manifests import NESTLAB_REF

CACHE = "/var/cache/nestlab/k8s"
SUITE = "bookworm"  # Python 3.11, as nestlab needs, and the dependencies' cp311 wheels
IMAGE_PYTHON, IMAGE_GLIBC = "3.11", 36  # bookworm's
MIRROR = os.environ.get("NESTLAB_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = [
    "python3",
    "iproute2",
    "iputils-ping",
    "iperf3",
    "procps",
    "libpcap0.8",
    "frr",
    "nftables",
    "openssh-server",
]  # libpcap: capture filters; frr: kind: frr; nftables and OpenSSH: the management network (NAT, SSH to nodes)
NOT_IN_IMAGE = {"matplotlib"}
PAUSE_REF = "localhost/pause:nestlab"
_SHIM = "#!/usr/bin/python3\nimport sys\nfrom nestlab.cli.app import main\nsys.exit(main())\n"


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _cached_layer(name: str, key: str, fill: Callable[[str], None]) -> oci.Layer:
    """The layer ``name-key``, made by ``fill(folder)`` the first time."""
    folder = os.path.join(CACHE, "layers")
    os.makedirs(folder, exist_ok=True)
    tar = os.path.join(folder, f"{name}-{key}.tar")
    if os.path.exists(tar):
        return oci.layer(tar)
    for old in os.listdir(folder):  # one version of each layer is kept
        if old.startswith(f"{name}-") and old != os.path.basename(tar):
            os.unlink(os.path.join(folder, old))
    staging = tar + ".d"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        fill(staging)
        return oci.pack(staging, tar)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run(cmd: list[str], what: str, log: Callable[[str], None]) -> None:
    log(what)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise LabError(f"{what} failed (exit {done.returncode}):\n{tail}")


def _base(log: Callable[[str], None]) -> oci.Layer:
    def fill(root: str) -> None:
        if not shutil.which("debootstrap"):
            raise LabError("the image's base is made with debootstrap: install the Debian package debootstrap (make k8s does)")
        _run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, root, MIRROR],
            f"debootstrap {SUITE} ({', '.join(PACKAGES)}) from {MIRROR}, once",
            log,
        )
        shutil.rmtree(os.path.join(root, "var/cache/apt/archives"), ignore_errors=True)
        os.makedirs(os.path.join(root, "var/cache/apt/archives/partial"))

    return _cached_layer("base", _key(SUITE, *PACKAGES), fill)


def _requirements() -> list[str]:

    with open(os.path.join(_checkout(), "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["k8s"]
    return [r for r in wanted if re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0] not in NOT_IN_IMAGE]


def _deps(log: Callable[[str], None]) -> oci.Layer:
    wanted = _requirements()

    def fill(root: str) -> None:
        target = os.path.join(root, "usr/local/lib/python3.11/dist-packages")
        _run(
            [
                sys.executable,
                "-P",
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--target",
                target,
                *_for_image(),
                *wanted,
            ],
            f"pip install {' '.join(wanted)} into the image, once",
            log,
        )
        shutil.rmtree(os.path.join(target, "bin"), ignore_errors=True)  # scripts naming this machine's Python

    return _cached_layer("deps", _key(IMAGE_PYTHON, oci.architecture(), *wanted), fill)


def _for_image() -> list[str]:
    """pip's options for wheels the image's Python (bookworm's CPython 3.11, glibc 2.36) runs on this
    machine's architecture, whatever Python runs pip here."""
    arch = platform.machine()
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(IMAGE_GLIBC, 16, -1)]
    tags += [f"manylinux{legacy}_{arch}" for legacy in ("2014", "2010", "1")]
    short = IMAGE_PYTHON.replace(".", "")
    return [
        "--python-version",
        IMAGE_PYTHON,
        "--implementation",
        "cp",
        *(a for abi in (f"cp{short}", "abi3", "none") for a in ("--abi", abi)),
        *(a for tag in tags for a in ("--platform", tag)),
        "--only-binary=:all:",
    ]


def _checkout() -> str:
    return os.path.dirname(_package())


def _package() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sources() -> list[str]:
    """This checkout's package files (no bytecode), sorted."""
    found = []
    for top, dirs, entries in os.walk(_package()):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [os.path.join(top, f) for f in sorted(entries) if not f.endswith(".pyc")]
    return found


def _code() -> oci.Layer:
    sources = _sources()
    digest = hashlib.sha256()
    for path in sources:
        with open(path, "rb") as fh:
            digest.update(path.encode() + b"\0" + fh.read())

    def fill(root: str) -> None:
        target = os.path.join(root, "usr/local/lib/python3.11/dist-packages")
        for path in sources:
            dest = os.path.join(target, os.path.relpath(path, _checkout()))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(path, dest)
        subprocess.run([sys.executable, "-P", "-m", "compileall", "-q", os.path.join(target, "nestlab")], check=True)
        shim = os.path.join(root, "usr/local/bin/nestlab")
        os.makedirs(os.path.dirname(shim))
        files.write(shim, _SHIM, 0o755, sync=False)

    return _cached_layer("nestlab", digest.hexdigest()[:16], fill)


def nestlab_image(log: Callable[[str], None] = lambda _line: None) -> str:
    """The OCI archive of ``NESTLAB_REF`` built from this checkout (cached); returns its path."""
    layers = [_base(log), _deps(log), _code()]
    return _archive(NESTLAB_REF, layers, ["/bin/sh"])


def pause_image(binary: str) -> str:
    """The OCI archive of ``PAUSE_REF`` holding ``binary`` as /pause."""
    if not os.path.exists(binary):
        raise LabError(f"{binary} is missing: run `make k8s` (it builds Kubernetes and the pause program)")

    with open(binary, "rb") as fh:
        key = hashlib.sha256(fh.read()).hexdigest()[:16]

    def fill(root: str) -> None:
        shutil.copy2(binary, os.path.join(root, "pause"))

    return _archive(PAUSE_REF, [_cached_layer("pause", key, fill)], ["/pause"])


def _archive(ref: str, layers: list[oci.Layer], entrypoint: list[str]) -> str:
    name = ref.rpartition("/")[2].replace(":", "-")
    dest = os.path.join(CACHE, "images", f"{name}-{_key(*(lay.digest for lay in layers))}.tar")
    if not os.path.exists(dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        for old in os.listdir(os.path.dirname(dest)):  # the image's earlier builds
            if old.startswith(f"{name}-"):
                os.unlink(os.path.join(os.path.dirname(dest), old))
        oci.archive(ref, layers, dest, entrypoint)
    return dest
