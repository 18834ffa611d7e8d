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
    "devices.frr.clab.group_vars.netlab_config_mode": ("", "FRR is configured with Ansible over SSH, not `docker exec`"),
    "devices.frr.clab.group_vars.ansible_connection": ("ssh", "nodes answer SSH on their management address"),
    "devices.frr.clab.group_vars.ansible_python_interpreter": ("/usr/bin/python3", "a node runs this machine's Python"),
    "devices.linux.clab.group_vars.ansible_connection": ("ssh", "nodes answer SSH on their management address"),
    "devices.linux.clab.group_vars.ansible_python_interpreter": ("/usr/bin/python3", "a node runs this machine's Python"),
    "devices.linux.clab.group_vars.ansible_ssh_pass": ("", "SSH logs in with your key, not a password"),
}


def kernel_workarounds(modules: bool, vrf: bool) -> tuple[dict[str, tuple[object, str]], list[str]]:
    """The settings this kernel needs beyond NETLAB_DEFAULTS, and why each other one is not written.
    ``modules``: /proc/modules exists (netlab reads it to load vrf); ``vrf``: a VRF device can be made."""
    needed: dict[str, tuple[object, str]] = {}
    skipped = []
    if modules:
        skipped.append("kmods.initial: this kernel lists its modules in /proc/modules, where netlab finds or loads vrf")
    else:
        needed["devices.frr.clab.kmods.initial"] = ([], "netlab reads /proc/modules to load vrf, and this kernel has none")
    if modules and vrf:
        needed["devices.frr.clab.group_vars.netlab_mgmt_vrf"] = (
            False,
            "this kernel has VRF: netlab would move each router's eth0 into VRF mgmt, where the SSH it configures the "
            "router over (in the default VRF) no longer answers",
        )
    else:
        skipped.append(
            "netlab_mgmt_vrf: netlab's VRF script runs only where `grep vrf /proc/modules` finds the module, "
            + ("which this kernel lacks" if not modules else "and this kernel cannot make a VRF")
        )
    return needed, skipped


_WORKAROUNDS = ("devices.frr.clab.kmods.initial", "devices.frr.clab.group_vars.netlab_mgmt_vrf")  # as a kernel needs


def probe_kernel() -> tuple[bool, bool]:
    """(/proc/modules exists, a VRF device can be made): the latter tried in a network namespace that ends with it."""
    import subprocess

    made = subprocess.run(
        ["unshare", "--net", "ip", "link", "add", "nlprobe-vrf", "type", "vrf", "table", "10"], capture_output=True
    )
    return Path("/proc/modules").exists(), made.returncode == 0


@compat_app.command("netlab")
def netlab(
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the `containerlab` command."),
    force: bool = typer.Option(False, "--force", help="Replace a `containerlab` that is not nestlab's."),
):
    """Make plain `netlab up` (and validate, connect, down) run its labs with nestlab: write netlab's user
    defaults (~/.netlab.yml: your other settings are kept), install the `containerlab` command, and make
    an SSH key in ~/.ssh if you have none (nodes accept your keys).  Run it once; netlab itself is unchanged."""
    import json
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
        needed, skipped = kernel_workarounds(*probe_kernel())
        written = {**NETLAB_DEFAULTS, **needed}
        for key in set(_WORKAROUNDS) - needed.keys():  # written by an earlier run on another kernel
            settings.pop(key, None)
        settings.update({key: value for key, (value, _why) in written.items()})
        path.write_text(
            "# netlab user defaults; the keys below `nestlab compat netlab` set (and why):\n"
            + "".join(f"#   {key}: {why}\n" for key, (_value, why) in written.items())
            + "".join(f"# not set: {why}\n" for why in skipped)
            + yaml.safe_dump(settings, sort_keys=False)
        )
        err.line(f"wrote {len(written)} netlab settings to {path}")
        for key, (value, why) in needed.items():
            err.line(f"  {key}: {json.dumps(value)}: {why}")
        for why in skipped:
            err.line(f"  not set: {why}")
        keys = Path.home() / ".ssh"
        if not list(keys.glob("id_*.pub")):
            keys.mkdir(mode=0o700, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id_ed25519")], check=True)
            err.line(f"made {keys / 'id_ed25519'}: the lab's nodes accept it")
        err.line("next: netlab up (in a lab folder); netlab validate; netlab connect NODE; netlab down")
