"""OpenSSH's server as nestlab runs it (the lab's nodes, emulated servers): key login as root only, no PAM."""

from __future__ import annotations

SSHD = "/usr/sbin/sshd"


def config(host_key: str, authorized_keys: str, *more: str) -> str:
    """An ``sshd_config`` accepting only the keys in ``authorized_keys``, with ``more`` lines after."""
    lines = [
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized_keys}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "PidFile none",
        "PrintMotd no",
        *more,
    ]
    return "\n".join(lines) + "\n"
