"""``nestlab compat install-cli``: the ``containerlab`` command, run by nestlab."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ...errors import LabError
from ..common import err, reported

compat_app = typer.Typer(help="Compatibility with other tools' commands.", no_args_is_help=True)


TOOLS = {"containerlab": ("clab", "containerlab deploy -t F"), "kathara": ("kathara", "kathara lstart -d DIR")}


@compat_app.command("install-cli")
def install_cli(
    tool: str = typer.Argument("containerlab", help="containerlab or kathara: the command to install."),
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the command."),
    force: bool = typer.Option(False, "--force", help="Replace a command of that name that is not nestlab's."),
):
    """Install a `containerlab` (or `kathara`) command that runs `nestlab clab ...` (`nestlab kathara ...`),
    for people and tools that call them."""
    with reported():
        if tool not in TOOLS:
            raise LabError(f"install-cli {tool}: give containerlab or kathara")
        group, example = TOOLS[tool]
        target = directory / tool
        if target.exists() and "nestlab" not in target.read_text(errors="replace") and not force:
            raise LabError(f"{target} exists and is not nestlab's; --force replaces it")
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f"#!/bin/sh\n# nestlab's {tool}-compatible command (nestlab compat install-cli {tool})\n"
            f'exec {sys.executable} -m nestlab.cli.app {group} "$@"\n'
        )
        target.chmod(0o755)
        err.line(f"installed {target}: `{example}` now runs nestlab")


# netlab's user defaults that let plain `netlab up` run a lab here (each: the setting, and why).
NETLAB_DEFAULTS = {
    "providers.clab.probe": (
        [{"cmd": "containerlab version", "err": "containerlab is not installed: run `nestlab compat netlab`"}],
        "netlab's check runs `docker version`; nestlab needs no Docker engine",
    ),
    "devices.frr.clab.kmods.initial": ([], "netlab reads /proc/modules to load vrf; nestlab's kernels may have no modules"),
    "devices.frr.clab.group_vars.netlab_config_mode": ("", "FRR is configured with Ansible over SSH, not `docker exec`"),
    "devices.frr.clab.group_vars.ansible_connection": ("ssh", "nodes answer SSH on their management address"),
    "devices.frr.clab.group_vars.ansible_python_interpreter": ("/usr/bin/python3", "a node runs this machine's Python"),
    "devices.frr.clab.group_vars.netlab_mgmt_vrf": (False, "the management interface stays in the default VRF"),
    "devices.linux.clab.group_vars.ansible_connection": ("ssh", "nodes answer SSH on their management address"),
    "devices.linux.clab.group_vars.ansible_python_interpreter": ("/usr/bin/python3", "a node runs this machine's Python"),
    "devices.linux.clab.group_vars.ansible_ssh_pass": ("", "SSH logs in with your key, not a password"),
}


@compat_app.command("netlab")
def netlab(
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the `containerlab` command."),
    force: bool = typer.Option(False, "--force", help="Replace a `containerlab` that is not nestlab's."),
):
    """Make plain `netlab up` (and validate, connect, down) run its labs with nestlab: write netlab's user
    defaults (~/.netlab.yml: your other settings are kept), install the `containerlab` command, and make
    an SSH key in ~/.ssh if you have none (nodes accept your keys).  Run it once; netlab itself is unchanged."""
    import shutil
    import subprocess

    import yaml

    install_cli(tool="containerlab", directory=directory, force=force)
    with reported():
        if not shutil.which("sudo"):
            raise LabError("netlab runs `sudo ip netns exec ...` even as root: apt-get install sudo")
        path = Path.home() / ".netlab.yml"
        try:
            settings = yaml.safe_load(path.read_text()) or {} if path.exists() else {}
        except yaml.YAMLError as exc:
            raise LabError(f"{path} is not YAML ({exc}); fix or remove it, then run this again") from None
        if not isinstance(settings, dict):
            raise LabError(f"{path} is not a mapping of netlab settings; fix or remove it, then run this again")
        settings.update({key: value for key, (value, _why) in NETLAB_DEFAULTS.items()})
        path.write_text(
            "# netlab user defaults; the keys below `nestlab compat netlab` set (and why):\n"
            + "".join(f"#   {key}: {why}\n" for key, (_value, why) in NETLAB_DEFAULTS.items())
            + yaml.safe_dump(settings, sort_keys=False)
        )
        err.line(f"wrote {len(NETLAB_DEFAULTS)} netlab settings to {path}")
        keys = Path.home() / ".ssh"
        if not list(keys.glob("id_*.pub")):
            keys.mkdir(mode=0o700, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id_ed25519")], check=True)
            err.line(f"made {keys / 'id_ed25519'}: the lab's nodes accept it")
        err.line("next: netlab up (in a lab folder); netlab validate; netlab connect NODE; netlab down")
