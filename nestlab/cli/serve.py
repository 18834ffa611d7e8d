"""`nestlab serve`: containerlab's REST API (clab-api-server's) over this machine's labs (docs/serve.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..errors import LabError
from .common import reported

commands = typer.Typer()


@commands.command()
def serve(
    listen: str = typer.Option("0.0.0.0:8090", "--listen", help="HOST:PORT to listen on."),
    cert: Path | None = typer.Option(
        None, "--cert", help="TLS certificate (PEM); default: a self-signed one made at the first start."
    ),
    key: Path | None = typer.Option(None, "--key", help="The certificate's private key (PEM)."),
    no_tls: bool = typer.Option(False, "--no-tls", help="Plain HTTP: on loopback (behind a TLS proxy) only, unless --force."),
    force: bool = typer.Option(False, "--force", help="Allow --no-tls on an address other than loopback."),
    state: Path = typer.Option(
        Path("/var/lib/nestlab/serve"), "--state", help="The server's folder: JWT secret (0600), certificate."
    ),
    token_lifetime: int = typer.Option(3600, "--token-lifetime", help="Seconds a token is valid after login."),
    max_body: int = typer.Option(1 << 20, "--max-body", help="Largest request body (a topology) in bytes."),
    install: bool = typer.Option(
        False,
        "--install",
        help="Set it up as a systemd service with these options (unit, state folder, groups clab_api and clab_admins) "
        "instead of serving; then systemctl enable --now nestlab-serve.",
    ),
    root: Path = typer.Option(Path("/"), "--root", hidden=True, help="--install's files and groups under this folder."),
):
    """Serve containerlab's REST API (clab-api-server's, which containerlab's web, desktop and VS Code apps use).

    Users sign in with their Linux name and password (PAM), if in group clab_api or nestlab (administrators:
    clab_admins or nestlab-admins).  An ordinary user's labs run as that user, in the user's own namespaces, with
    their files in ~/.clab; an administrator's run as root.  Runs as root.

    Example: sudo nestlab serve   (https://HOST:8090 with a self-signed certificate)

    Example: sudo nestlab serve --listen 127.0.0.1:8090 --no-tls   (behind a TLS proxy)

    Example: sudo nestlab serve --install && sudo systemctl enable --now nestlab-serve   (a service of the machine)
    """
    with reported():
        from ..serve.config import Listen, Settings
        from ..serve.server import serve as run

        settings = Settings(
            listen=Listen.parse(listen),
            tls=not no_tls,
            cert=str(cert) if cert else None,
            key=str(key) if key else None,
            state=str(state),
            token_lifetime=token_lifetime,
            max_body=max_body,
            python=sys.executable,
        )
        if token_lifetime < 60:
            raise LabError(f"--token-lifetime {token_lifetime}: at least 60 seconds")
        if install:
            from ..serve.install import install as set_up

            for line in set_up(settings, force, str(root)):
                typer.echo(line)
            return
        run(settings, force)
