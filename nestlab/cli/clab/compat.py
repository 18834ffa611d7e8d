"""``nestlab compat install-cli``: the ``containerlab`` command, run by nestlab."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import typer
import yaml

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
            f'exec {sys.executable} -P -m nestlab.cli.app {group} "$@"\n'
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


_BEGIN = "# >>> nestlab compat netlab >>>"
_END = "# <<< nestlab compat netlab <<<"
_OLD_HEADER = "# netlab user defaults; the keys below `nestlab compat netlab` set (and why):"
_UNSET = object()


def user_text(text: str) -> str:
    """The part of ~/.netlab.yml its user wrote, verbatim: all but nestlab's block (between :data:`_BEGIN` and
    :data:`_END`).  A file an earlier nestlab wrote whole (its header, then ``yaml.safe_dump``) gives back
    its settings other than the keys that header names as nestlab's."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].rstrip("\n") == _OLD_HEADER:
        ours, body = set(), []
        for line in lines[1:]:
            if line.startswith("#   ") and ": " in line:
                ours.add(line[4:].split(": ", 1)[0])
            elif not line.startswith("# not set: "):
                body.append(line)
        kept, skipping = [], False
        for line in body:  # top-level entries of the dump: a key at column 0, then its indented lines
            if line[:1] not in (" ", "-", "\n", ""):
                skipping = _key(line) in ours | set(_WORKAROUNDS)
            if not skipping:
                kept.append(line)
        return "".join(kept)
    kept, inside = [], False
    for line in lines:
        if line.rstrip() == _BEGIN:
            inside = True
        elif line.rstrip() == _END:
            inside = False
        elif not inside:
            kept.append(line)
    return "".join(kept)


def _key(line: str) -> str:
    """The key of a top-level YAML line (``key: value``), unquoted."""
    found = re.match(r"""\s*(['"]?)([^'":]+)\1\s*:""", line)
    return found.group(2) if found else ""


def _setting(settings: dict, key: str) -> object:
    """The value the user's settings give ``key`` (dotted, as netlab takes it), flat or nested; :data:`_UNSET` if none."""
    parts = key.split(".")
    for split in range(len(parts), 0, -1):  # "a.b.c" as a key of its own, or a: {b.c: }, or a: {b: {c: }}
        head, rest = ".".join(parts[:split]), ".".join(parts[split:])
        if head in settings:
            if not rest:
                return settings[head]
            if isinstance(settings[head], dict):
                found = _setting(settings[head], rest)
                if found is not _UNSET:
                    return found
    return _UNSET


def probe_kernel() -> tuple[bool, bool]:
    """(/proc/modules exists, a VRF device can be made): the latter tried in a network namespace that ends with it."""

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
    defaults (~/.netlab.yml: a block of nestlab's; every setting and comment of yours is kept, and a key
    nestlab would set that you set stays yours), install the `containerlab` command, and make
    an SSH key in ~/.ssh if you have none (nodes accept your keys).  Run it once; netlab itself is unchanged."""

    install_cli(tool="containerlab", directory=directory, force=force)
    with reported():
        if not shutil.which("sudo"):
            raise LabError("netlab runs `sudo ip netns exec ...` even as root: apt-get install sudo")
        path = Path.home() / ".netlab.yml"
        yours = user_text(path.read_text()) if path.exists() else ""
        try:
            settings = yaml.safe_load(yours) or {}
        except yaml.YAMLError as exc:
            raise LabError(f"{path} is not YAML ({exc}); fix or remove it, then run this again") from None
        if not isinstance(settings, dict):
            raise LabError(f"{path} is not a mapping of netlab settings; fix or remove it, then run this again")
        needed, skipped = kernel_workarounds(*probe_kernel())
        written, kept = {}, {}
        for key, (value, why) in {**NETLAB_DEFAULTS, **needed}.items():
            found = _setting(settings, key)
            if found is _UNSET:
                written[key] = value, why
            else:
                kept[key] = found, value, why
        block = (
            f"{_BEGIN}\n# the keys below `nestlab compat netlab` sets (and why); it rewrites this block only:\n"
            + "".join(f"#   {key}: {why}\n" for key, (_value, why) in written.items())
            + "".join(f"# not set: {why}\n" for why in skipped)
            + "".join(f"# yours, kept: {key}\n" for key in kept)
            + (yaml.safe_dump({key: value for key, (value, _why) in written.items()}, sort_keys=False) if written else "")
            + f"{_END}\n"
        )
        path.write_text(yours + ("\n" if yours and not yours.endswith("\n") else "") + block)
        err.line(f"wrote {len(written)} netlab settings to {path}")
        for key, (value, why) in needed.items():
            if key in written:
                err.line(f"  {key}: {json.dumps(value)}: {why}")
        for why in skipped:
            err.line(f"  not set: {why}")
        for key, (theirs, ours, why) in kept.items():
            same = theirs == ours
            err.line(
                f"  {key}: yours ({json.dumps(theirs)}) kept" + ("" if same else f"; nestlab would set {json.dumps(ours)}: {why}")
            )
        keys = Path.home() / ".ssh"
        if not list(keys.glob("id_*.pub")):
            keys.mkdir(mode=0o700, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id_ed25519")], check=True)
            err.line(f"made {keys / 'id_ed25519'}: the lab's nodes accept it")
        err.line("next: netlab up (in a lab folder); netlab validate; netlab connect NODE; netlab down")


commands = typer.Typer()
commands.add_typer(compat_app, name="compat")
