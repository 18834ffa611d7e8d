"""``nestlab serve --install``: the server set up as a systemd service of this machine (its unit, its folder 0700,
the groups that let users in), the service itself left for the administrator to start."""

from __future__ import annotations

import os
import shlex
import subprocess

from ..backends.kernel import files
from ..errors import LabError
from .config import Settings
from .server import check

UNIT = "etc/systemd/system/nestlab-serve.service"
GROUPS = ("clab_api", "clab_admins")  # clab-api-server's names, which containerlab's apps' docs use


def command(settings: Settings, force: bool) -> list[str]:
    """The command line the service runs: this nestlab (its interpreter's absolute path) with the same options."""
    host = f"[{settings.listen.host}]" if ":" in settings.listen.host else settings.listen.host
    argv = [settings.python, "-m", "nestlab.cli.app", "serve", "--listen", f"{host}:{settings.listen.port}"]
    argv += [
        "--state",
        os.path.abspath(settings.state),
        "--token-lifetime",
        str(settings.token_lifetime),
        "--max-body",
        str(settings.max_body),
    ]
    if settings.cert and settings.key:
        argv += ["--cert", os.path.abspath(settings.cert), "--key", os.path.abspath(settings.key)]
    if not settings.tls:
        argv += ["--no-tls", *(["--force"] if force else [])]
    return argv


def unit(argv: list[str]) -> str:
    """The systemd unit running ``argv`` as root, started again when it fails."""
    return (
        "[Unit]\n"
        "Description=nestlab serve: containerlab's REST API for this machine's users (docs/serve.md)\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n\n"
        "[Service]\n"
        f"ExecStart={shlex.join(argv)}\n"
        "Restart=on-failure\n"
        "RestartSec=2\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _group(name: str, root: str) -> None:
    """The system group ``name`` made unless it is there (in ``root``'s /etc when not ``/``)."""
    prefix = ["--prefix", root] if root != "/" else []
    done = subprocess.run(["groupadd", "--system", "-f", *prefix, name], capture_output=True, text=True)
    if done.returncode:
        raise LabError(f"groupadd {name} failed: {done.stderr.strip()}")


def install(settings: Settings, force: bool, root: str = "/") -> list[str]:
    """The unit written, the server's folder made (0700), the groups made if missing (all under ``root``); what
    the administrator does next, as lines to print.  Refused where the server would refuse to start."""
    check(settings, force)
    argv, state = command(settings, force), os.path.abspath(settings.state)
    path = os.path.join(root, UNIT)
    files.write(path, unit(argv), mode=0o644, create=0o755)
    with files.folder(os.path.join(root, state.lstrip("/")), create=0o700) as fd:
        os.fchmod(fd, 0o700)
    for group in GROUPS:
        _group(group, root)
    return [
        f"wrote {path}: {shlex.join(argv)}",
        f"made {state} (0700) and the groups {' and '.join(GROUPS)} (where missing)",
        "next: systemctl daemon-reload && systemctl enable --now nestlab-serve",
        "then let users in: usermod -aG clab_api NAME (their labs run as them), usermod -aG clab_admins NAME "
        "(administrators: their labs run as root)",
    ]
