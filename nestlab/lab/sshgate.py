"""SSH on port 22 of every node's management address, with no process per idle node.

The deploy binds one listening socket inside each node's network namespace, then hands them all to
one process per lab (``python -m nestlab.lab.sshgate``), which waits on them together.  Each
connection gets ``sshd -i`` started inside its node (as ``nestlab exec`` would start it), talking
over the accepted socket, so a session sees the node's interfaces, hostname and files, and ends
with its connection.  sshd reads the lab's host key, authorized keys (the lab's own key, and root's
public keys from ~/.ssh) and configuration from ``/var/lib/nestlab/ssh/LAB`` (root's alone).  A node
whose ``cmd`` or ``exec`` runs an SSH server of its own, or that says ``ssh: false``, is left alone.
"""

from __future__ import annotations

import errno
import glob
import os
import selectors
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

from .. import names
from ..backends.services import sshd
from ..backends.services.sshd import SSHD
from ..errors import LabError
from ..model.credentials import Login

if TYPE_CHECKING:
    from .lab import Lab

PORT = 22
# sshd -i for a node with credentials: in a mount namespace of its own, the node's /etc/passwd plus the
# login's line and a shadow file of that line alone are bound over /etc/passwd and /etc/shadow (the node's
# files and the machine's are untouched; the temporary copies are gone once bound).
# Arguments: sshd, its config, the node's logins/NODE file.
LOGIN = r"""mkdir -p -m 0755 /run/sshd && exec unshare -m --propagation private sh -c '
user=$(head -n1 "$3" | cut -d: -f1) && t=$(mktemp -d) &&
grep -v "^$user:" /etc/passwd > "$t/passwd" && head -n1 "$3" >> "$t/passwd" &&
tail -n1 "$3" > "$t/shadow" && chmod 600 "$t/shadow" &&
mount --bind "$t/passwd" /etc/passwd && mount --bind "$t/shadow" /etc/shadow && rm -rf "$t" &&
exec "$1" -i -f "$2" -o PasswordAuthentication=yes -o PermitRootLogin=yes' login "$@"
"""


def client_key(lab: str) -> str:
    return os.path.join(names.lab_keys(lab), "id_ed25519")


def keys(lab: str, logins: dict[str, Login]) -> str:
    """The lab's keys, sshd configuration and the logins ``credentials:`` ask for, made once (root's alone;
    the two keys at once)."""
    folder = names.lab_keys(lab)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    making = [
        subprocess.Popen(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"nestlab lab {lab}", "-f", path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for path in (os.path.join(folder, key) for key in ("ssh_host_ed25519_key", "id_ed25519"))
        if not os.path.exists(path)
    ]
    for proc in making:
        if proc.wait():
            raise LabError(f"ssh-keygen failed: {proc.stderr.read().decode().strip() if proc.stderr else ''}")
    mine = [path for path in glob.glob(os.path.expanduser("~/.ssh/id_*.pub"))]
    mine += sorted(
        {f"{x.identity_file}.pub" for x in logins.values() if x.identity_file and os.path.exists(f"{x.identity_file}.pub")}
    )
    with open(os.path.join(folder, "authorized_keys"), "w") as fh:
        for path in [client_key(lab) + ".pub", *mine]:
            with open(path) as key:
                fh.write(key.read().strip() + "\n")
    with open(os.path.join(folder, "sshd_config"), "w") as fh:
        fh.write(
            sshd.config(
                f"{folder}/ssh_host_ed25519_key",
                f"{folder}/authorized_keys",
                "AcceptEnv LANG LC_*",
                "Subsystem sftp /usr/lib/openssh/sftp-server",
            )
        )
    _logins(folder, {node: x for node, x in logins.items() if x.username or x.password})
    for entry in os.scandir(folder):
        os.chmod(entry.path, 0o600 if entry.is_file() else 0o700)
    return folder


def _logins(folder: str, logins: dict[str, Login]) -> None:
    """Per node with ``credentials:``, ``logins/NODE``: its passwd line (uid 0, as a device's admin) and
    shadow line (the password hashed by OpenSSL's SHA-512 crypt, or ``*``: keys only)."""
    where = os.path.join(folder, "logins")
    os.makedirs(where, mode=0o700, exist_ok=True)
    for stale in set(os.listdir(where)) - set(logins):  # a redeploy that dropped a node's credentials
        os.unlink(os.path.join(where, stale))
    words = sorted({x.password for x in logins.values() if x.password})
    hashed = {}
    if words:
        made = subprocess.run(
            ["openssl", "passwd", "-6", "-stdin"], input="\n".join(words) + "\n", capture_output=True, text=True
        )
        if made.returncode:
            raise LabError(f"openssl could not hash the lab's passwords: {made.stderr.strip()}")
        hashed = dict(zip(words, made.stdout.split()))
    for node, x in logins.items():
        with open(os.path.join(where, node), "w") as fh:
            fh.write(f"{x.user}:x:0:0:{x.user}:/root:/bin/sh\n{x.user}:{hashed.get(x.password or '', '*')}:20000:0:99999:7:::\n")


def wanted(lab: Lab, node: str) -> bool:
    """Whether the node gets nestlab's SSH: not with ``ssh: false``, nor when its own commands run sshd."""
    spec = lab.document()["topology"]["nodes"].get(node, {})
    if spec.get("ssh") is False:
        return False
    own = " ".join([str(spec.get("cmd") or ""), *map(str, spec.get("exec") or [])])
    return "sshd" not in own


class Gate:
    """The lab's gate process, started with its sockets."""

    def __init__(self, proc: subprocess.Popen | None):
        self.proc = proc

    def ready(self) -> None:
        """Raise if the gate died at once (it only waits afterwards)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise LabError(f"the SSH gate of the lab ended at once (exit {self.proc.returncode})")


def start(lab: Lab, nodes: list[tuple[str, str]]) -> Gate:
    """Bind port 22 of each node's management address (``nodes``: node, address) inside it and start the
    lab's gate on those sockets."""
    from ..backends.kernel import namespaces

    if not os.path.exists(SSHD):
        return Gate(None)  # no sshd here: names and inventories still work; `nestlab doctor` says so
    folder = names.lab_keys(lab.name)
    held: list[tuple[socket.socket, str]] = []
    try:
        for node, address in nodes:
            if not wanted(lab, node):
                continue
            with namespaces.entered(names.netns_path(lab.name, node)):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, PORT))
            except OSError as exc:
                sock.close()
                if exc.errno == errno.EADDRINUSE:
                    continue  # the node's own SSH server
                raise
            sock.listen(64)
            held.append((sock, node))
        if not held:
            return Gate(None)
        args = [sys.executable, "-m", "nestlab.lab.sshgate", names.lab_dir(lab.name) + "/", folder]
        args += [f"{sock.fileno()}={node}" for sock, node in held]
        proc = subprocess.Popen(
            args,
            pass_fds=[sock.fileno() for sock, _ in held],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        for sock, _ in held:
            sock.close()
    return Gate(proc)


def serve(lab_dir: str, keys: str, listeners: dict[int, str]) -> None:
    """Accept on every node's socket; each connection gets ``sshd -i`` inside its node."""
    from .lab import Lab
    from .node import Node

    lab = Lab.running(os.path.basename(lab_dir.rstrip("/")))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # sessions are reaped by the kernel
    chooser = selectors.DefaultSelector()
    for fd, node in listeners.items():
        chooser.register(socket.socket(fileno=fd), selectors.EVENT_READ, node)
    command = ["sh", "-c", f'mkdir -p -m 0755 /run/sshd && exec {SSHD} -i -f "{keys}/sshd_config"']
    with_login = ["sh", "-c", LOGIN, "login", SSHD, f"{keys}/sshd_config"]
    while True:
        for key, _ in chooser.select():
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            login = os.path.join(keys, "logins", key.data)
            try:
                run = [*with_login, login] if os.path.exists(login) else command
                Node(lab, key.data).popen(run, stdin=conn, stdout=conn, stderr=subprocess.DEVNULL)
            except (OSError, LabError):
                pass  # the node is gone or stopped: this connection ends unanswered
            finally:
                conn.close()


if __name__ == "__main__":
    _dir, _keys_dir, *pairs = sys.argv[1:]
    serve(_dir, _keys_dir, {int(fd): node for fd, node in (p.split("=", 1) for p in pairs)})
