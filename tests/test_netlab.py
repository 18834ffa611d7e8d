"""netlab (networklab from PyPI, unchanged) drives a lab through nestlab: after `nestlab compat netlab`, plain
`netlab up` of 3 FRR routers and 2 Linux hosts in OSPF configures them over SSH, `netlab validate` passes,
`netlab connect` answers, and `netlab down` leaves nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NESTLAB as NESTLAB_CLI
from conftest import ROOT, run_cli

from nestlab.engine import cleanup

NETLAB = Path(sys.executable).parent / "netlab"
pytestmark = pytest.mark.skipif(not NETLAB.exists(), reason="needs networklab from PyPI (make deps installs it)")


@pytest.fixture
def netlab_defaults(tmp_path):
    """`nestlab compat netlab` with its command in a folder of the test's; root's own ~/.netlab.yml and SSH key
    are put back as they were."""
    home = Path.home()
    settings, key = home / ".netlab.yml", home / ".ssh" / "id_ed25519"
    kept = settings.read_bytes() if settings.exists() else None
    had_key = bool(list((home / ".ssh").glob("id_*.pub")))
    bin_dir = tmp_path / "bin"
    done = run_cli("compat", "netlab", "--dir", str(bin_dir))
    try:
        assert done.returncode == 0, done.stderr
        yield {**os.environ, "PATH": f"{bin_dir}:{NETLAB.parent}:{os.environ['PATH']}"}
    finally:
        if kept is None:
            settings.unlink(missing_ok=True)
        else:
            settings.write_bytes(kept)
        if not had_key:
            for made in (key, key.with_suffix(".pub")):
                made.unlink(missing_ok=True)


def _netlab(env: dict, folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(NETLAB), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def test_netlab_up_validate_connect_down(netlab_defaults, tmp_path):
    folder = tmp_path / "lab"
    shutil.copytree(ROOT / "tests" / "fixtures" / "netlab-ospf", folder)
    try:
        up = _netlab(netlab_defaults, folder, "up")
        assert up.returncode == 0 and "OK: Lab devices configured" in up.stdout, up.stdout[-3000:] + up.stderr[-2000:]
        checked = _netlab(netlab_defaults, folder, "validate")
        assert checked.returncode == 0 and "Tests passed: 2" in checked.stdout, checked.stdout[-3000:] + checked.stderr[-1000:]
        shown = _netlab(netlab_defaults, folder, "connect", "r1", "--show", "ip", "ospf", "neighbor", timeout=60)
        assert shown.returncode == 0 and shown.stdout.count("Full") == 2, shown.stdout + shown.stderr
        pinged = _netlab(netlab_defaults, folder, "connect", "h1", "ping", "-c1", "-W2", "h2", timeout=60)
        assert pinged.returncode == 0 and "1 received" in pinged.stdout, pinged.stdout + pinged.stderr
    finally:
        down = _netlab(netlab_defaults, folder, "down", "--cleanup")
    assert down.returncode == 0, down.stdout[-2000:] + down.stderr[-2000:]
    assert not cleanup.left("lab"), "netlab's lab (named after its folder) left nothing"


def test_compat_netlab_writes_only_what_this_kernel_needs(tmp_path):
    """The kernel workarounds follow what netlab's code would meet here: /proc/modules (netlab reads it to load vrf)
    and whether a VRF can be made (netlab's script would then move eth0 off the SSH nestlab answers on)."""
    import yaml

    from nestlab.cli.clab.compat import kernel_workarounds

    kmods, vrf = "devices.frr.clab.kmods.initial", "devices.frr.clab.group_vars.netlab_mgmt_vrf"
    # Both branches of the decision, by what the kernel has.
    assert set(kernel_workarounds(modules=False, vrf=False)[0]) == {kmods}
    assert set(kernel_workarounds(modules=True, vrf=True)[0]) == {vrf}
    assert set(kernel_workarounds(modules=True, vrf=False)[0]) == set()
    # This kernel, probed apart from nestlab's own probe; a setting written on another kernel is taken back.
    has_modules = os.path.exists("/proc/modules")
    made = subprocess.run(["unshare", "--net", "ip", "link", "add", "v0", "type", "vrf", "table", "7"], capture_output=True)
    expected = ({kmods} if not has_modules else set()) | ({vrf} if has_modules and made.returncode == 0 else set())
    earlier = (  # as an earlier nestlab wrote it, whole: its header names its keys
        "# netlab user defaults; the keys below `nestlab compat netlab` set (and why):\n"
        f"#   {kmods}: netlab reads /proc/modules\n#   {vrf}: this kernel has VRF\n"
    )
    (tmp_path / ".netlab.yml").write_text(earlier + yaml.safe_dump({kmods: ["stale"], vrf: True, "mine": 1}))
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        [*NESTLAB_CLI, "compat", "netlab", "--dir", str(tmp_path / "bin")], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load((tmp_path / ".netlab.yml").read_text())
    assert written["mine"] == 1 and {kmods, vrf} & set(written) == expected, written
    for key in expected:
        assert f"  {key}: " in done.stderr, done.stderr
    assert done.stderr.count("  not set: ") == 2 - len(expected), done.stderr


USERS_DEFAULTS = """# my lab defaults: keep this comment
devices.frr.clab.group_vars.netlab_mgmt_vrf: true   # I want the mgmt VRF
defaults:
  # the provider I use
  provider: clab
devices:
  linux:
    clab:
      group_vars:
        ansible_connection: docker
"""


def test_compat_netlab_keeps_every_setting_and_comment_of_yours(tmp_path):
    """A defaults file of the user's, with comments, a flat and a nested key of those nestlab writes: their text
    stays as written, their values win (and are said), nestlab's own keys go into a block it rewrites alone."""
    import yaml

    vrf = "devices.frr.clab.group_vars.netlab_mgmt_vrf"
    path = tmp_path / ".netlab.yml"
    path.write_text(USERS_DEFAULTS)
    env = {**os.environ, "HOME": str(tmp_path)}
    for _ in range(2):  # a second run changes nothing
        done = subprocess.run(
            [*NESTLAB_CLI, "compat", "netlab", "--dir", str(tmp_path / "bin")],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        text = path.read_text()
        assert text.startswith(USERS_DEFAULTS), text
        assert text.count("# >>> nestlab compat netlab >>>") == 1, text
    written = yaml.safe_load(text)
    assert written[vrf] is True and written["defaults"] == {"provider": "clab"}, written
    assert written["devices"]["linux"]["clab"]["group_vars"]["ansible_connection"] == "docker", written
    assert "devices.linux.clab.group_vars.ansible_connection" not in written, written  # theirs, nested, not overridden
    assert written["devices.frr.clab.group_vars.ansible_connection"] == "ssh", written  # nestlab's others written
    assert 'devices.linux.clab.group_vars.ansible_connection: yours ("docker") kept; nestlab would set "ssh"' in done.stderr
    if os.path.exists("/proc/modules"):  # where nestlab would write netlab_mgmt_vrf: false, the user's true stays
        assert f"{vrf}: yours (true) kept" in done.stderr, done.stderr
