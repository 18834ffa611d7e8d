"""SSH on port 22 of every node's management address, with no process per idle node.

The deploy binds one listening socket inside each node's network namespace, then hands them all to
one process per lab (``python -m nestlab.engine.sshgate``), which waits on them together.  Each
connection gets ``sshd -i`` started inside its node (as ``nestlab exec`` would start it), talking
over the accepted socket, so a session sees the node's interfaces, hostname and files, and ends
with its connection.  sshd reads the lab's host key, authorized keys (the lab's own key, and root's
public keys from ~/.ssh) and configuration from ``/var/lib/nestlab/ssh/LAB`` (root's alone).  A node
whose ``cmd`` or ``exec`` runs an SSH server of its own, or that says ``ssh: false``, is left alone.

A password login (``credentials:``) is never root: it is its node's own unprivileged uid (login_uids.py; logins on
two nodes are two users), in no group of a machine user of its name, under no_new_privs (no setuid program raises
it); destroy kills its processes.
At most :data:`MAX_STARTUPS` sessions of a lab are not yet logged in at once (a connection beyond is closed,
as sshd's MaxStartups does; one not logged in is at most two sshd), and sshd ends one after its grace time.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from .. import names
from ..backends.kernel import detached, files, procs
from ..backends.services import sshd
from ..backends.services.sshd import SSHD
from ..errors import LabError
from ..model import files as model_files
from ..model.credentials import Login
from . import login_uids

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint

PORT = 22
MAX_STARTUPS = 16  # sessions of a lab not yet logged in at once (two sshd each at most); beyond, a connection is closed
GRACE = 30  # seconds a session has to log in (sshd's LoginGraceTime); NESTLAB_SSH_GRACE changes it
# a logged-in session's title: OpenSSH's sshd (before 9.8) or sshd-session (9.8 and later), the user at its terminal
TITLE = re.compile(rb"sshd(-session)?: [^ ]+@(notty|pts/\d+)")
# sshd -i for a node with credentials, in a mount namespace of its own: tmpfs over the machine's world-writable
# folders and /home (the login's home, with the lab's authorized keys); the node's /etc/passwd plus the login's
# line, and a shadow file of that line and root's (keys only), bound over /etc/passwd and /etc/shadow; the
# machine's /etc/group (and gshadow) with the login's name taken out of every group and a group of the login's gid
# under its name, bound over them, so the login inherits no group (nor, by name, sudoers rule) of a machine user
# of the same name (the node's files and the machine's are untouched; rootless, the machine's gshadow is unreadable
# and stays as it is, unreadable to the login too).  sshd runs under no_new_privs (setpriv),
# which its sessions inherit: sshd only drops privileges, and no setuid program (sudo, su, chfn, passwd) can raise
# a login's.  Keys: root's in a folder of the session's own /tmp (readable by root alone), the login's in its home,
# so a login's own key logs in as the login and never as root.  Arguments: sshd, its config, logins/NODE, the
# login's keys (login-keys/NODE), GROUPS (an awk program), root's keys.
LOGIN = r"""mkdir -p -m 0755 /run/sshd && exec unshare -m --propagation private sh -ec '
for d in /tmp /var/tmp /dev/shm /run/lock; do
  if [ -d $d ]; then mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $d; fi
done
IFS=: read -r user _ uid gid _ home _ < "$3"
if [ -d /home ]; then
  mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /home
  mkdir -m 0700 "$home" "$home/.ssh"
  cp "$4" "$home/.ssh/authorized_keys"
  chown -R "$uid:$gid" "$home"
fi
t=$(mktemp -d)
{ grep -v "^$user:" /etc/passwd || true; head -n1 "$3"; } > "$t/passwd"
{ echo "root:*:20000:0:99999:7:::"; tail -n1 "$3"; } > "$t/shadow"
chmod 600 "$t/shadow"
mount --bind "$t/passwd" /etc/passwd
mount --bind "$t/shadow" /etc/shadow
for g in group gshadow; do
  if [ -f /etc/$g ] && [ -r /etc/$g ]; then
    line="$user:x:$gid:"; if [ $g = gshadow ]; then line="$user:!::"; fi
    { awk -F: -v OFS=: -v user="$user" -v gid="$gid" -v g=$g "$5" /etc/$g; echo "$line"; } > "$t/$g"
    chown --reference=/etc/$g "$t/$g"; chmod --reference=/etc/$g "$t/$g"
    mount --bind "$t/$g" /etc/$g
  fi
done
rm -rf "$t"
k=$(mktemp -d)
cp "$6" "$k/root"
exec setpriv --no-new-privs "$1" -i -f "$2" -o PasswordAuthentication=yes -o "AuthorizedKeysFile $k/%u /home/%u/.ssh/authorized_keys"' login "$@"
"""
# /etc/group or gshadow (g) without the login's group nor the login's gid, and without the login's name in any member
# list (the 4th field of both)
GROUPS = r"""$1 == user || (g == "group" && $3 == gid) { next }
{ n = split($4, m, ","); $4 = ""; for (i = 1; i <= n; i++) if (m[i] != user) $4 = $4 ($4 == "" ? "" : ",") m[i]; print }
"""


NO_SERVER = (
    "no SSH server can run in your namespaces: your user has no subordinate ids, and sshd (and dropbear alike) sets "
    "the session's groups, which a user namespace of one user forbids. `nestlab ssh` and `nestlab exec` reach the "
    "node without one; for ssh, Ansible and Nornir give your user subordinate ids in /etc/subuid and /etc/subgid "
    "(docs/rootless.md), or run the lab with sudo"
)


def login_grace() -> int:
    """The sessions' login grace time in seconds: :data:`GRACE`, or ``NESTLAB_SSH_GRACE`` (1 to 600)."""
    given = os.environ.get("NESTLAB_SSH_GRACE", str(GRACE))
    if not given.isdigit() or not 1 <= int(given) <= 600:
        raise LabError(f"NESTLAB_SSH_GRACE={given!r}: give whole seconds, 1 to 600")
    return int(given)


def client_key(lab: str) -> str:
    return os.path.join(names.lab_keys(lab), "id_ed25519")


def keys(lab: str, logins: dict[str, Login]) -> str:
    """The lab's keys, sshd configuration and the logins ``credentials:`` ask for, made once (root's alone;
    the two keys at once)."""
    folder = names.lab_keys(lab)
    files.make_dirs(folder, 0o700)
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
    roots = [client_key(lab) + ".pub", *sorted(glob.glob(os.path.expanduser("~/.ssh/id_*.pub")))]
    _authorized(os.path.join(folder, "authorized_keys"), roots)
    files.write(
        os.path.join(folder, "sshd_config"),
        sshd.config(
            f"{folder}/ssh_host_ed25519_key",
            f"{folder}/authorized_keys",
            "AcceptEnv LANG LC_*",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            f"LoginGraceTime {login_grace()}",
        ),
        sync=False,
    )
    _logins(folder, {node: x for node, x in logins.items() if x.user != "root"}, roots)
    for entry in os.scandir(folder):
        os.chmod(entry.path, 0o600 if entry.is_file() else 0o700)
    return folder


MAX_KEY = 16 * 1024  # a public key file: an ed25519 key is 100 bytes, an RSA key of 16384 bits under 3 KiB


def _authorized(path: str, keys: list[str]) -> None:
    """``path`` holding the public keys in the files ``keys``, one a line.  Each is read bounded, a regular file
    only, without blocking: a key file in a folder another user may write could be a FIFO or a link to /dev/zero."""
    text = ""
    for key in keys:
        try:
            text += model_files.read_text(key, MAX_KEY).strip() + "\n"
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not a text file"
            raise LabError(f"{key}: not read as a public key: {why}") from None
    files.write(path, text, sync=False)


def _logins(folder: str, logins: dict[str, Login], roots: list[str]) -> None:
    """Per node with a ``credentials:`` user, ``logins/NODE``: its passwd line (the node's login uid, home /home/USER)
    and shadow line (the password hashed by OpenSSL's SHA-512 crypt, or ``*``: keys only); and ``login-keys/NODE``,
    the keys that log in as that user: its ``identity-file``'s public half and root's (``roots``), which are never
    root's (a login's key is the login, never root)."""
    where, keyed = os.path.join(folder, "logins"), os.path.join(folder, "login-keys")
    for made in (where, keyed):
        files.make_dirs(made, 0o700)
        for stale in set(os.listdir(made)) - set(logins):  # a redeploy that dropped a node's credentials
            os.unlink(os.path.join(made, stale))
    for node, x in logins.items():
        own = f"{x.identity_file}.pub" if x.identity_file and os.path.exists(f"{x.identity_file}.pub") else None
        _authorized(os.path.join(keyed, node), [*roots, *([own] if own else [])])
    if not logins:
        return
    uids = login_uids.given(folder, logins)
    words = sorted({x.password for x in logins.values() if x.password})
    hashed: dict[str, str] = {}
    if words:
        crypt = subprocess.run(
            ["openssl", "passwd", "-6", "-stdin"], input="\n".join(words) + "\n", capture_output=True, text=True
        )
        if crypt.returncode or len(crypt.stdout.split()) != len(words):
            raise LabError(f"openssl could not hash the lab's passwords: {crypt.stderr.strip()}")
        hashed = dict(zip(words, crypt.stdout.split()))
    for node, x in logins.items():
        uid = uids[node]
        files.write(
            os.path.join(where, node),
            f"{x.user}:x:{uid}:{uid}:{x.user}:/home/{x.user}:/bin/sh\n"
            f"{x.user}:{hashed.get(x.password or '', '*')}:20000:0:99999:7:::\n",
            sync=False,
        )


def wanted(blueprint: Blueprint, node: str) -> bool:
    """Whether the node gets nestlab's SSH: not with ``ssh: false``, nor when its own commands run sshd."""
    spec = blueprint.document["topology"]["nodes"].get(node, {})
    if spec.get("ssh") is False:
        return False
    own = " ".join([str(spec.get("cmd") or ""), *map(str, spec.get("exec") or [])])
    return "sshd" not in own


class Gate:
    """The lab's gate process, started with its sockets."""

    def __init__(self, proc: subprocess.Popen[bytes] | None):
        self.proc = proc

    def ready(self) -> None:
        """Raise if the gate died at once (it only waits afterwards)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise LabError(f"the SSH gate of the lab ended at once (exit {self.proc.returncode})")


def start(blueprint: Blueprint, nodes: list[tuple[str, str]]) -> Gate:
    """Bind port 22 of each node's management address (``nodes``: node, address) inside it and start the
    lab's gate on those sockets."""
    from ..backends.kernel import namespaces

    if not os.path.exists(SSHD) or not blueprint.machine.serves_ssh:
        return Gate(None)  # no sshd here: names and inventories still work; `nestlab doctor` says so
    folder = names.lab_keys(blueprint.name)
    held: list[tuple[socket.socket, str]] = []
    try:
        for node, address in nodes:
            if not wanted(blueprint, node):
                continue
            with namespaces.entered(names.netns_path(blueprint.name, node)):
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
        args = [*names.python_module("nestlab.engine.sshgate"), names.lab_dir(blueprint.name) + "/", folder, str(login_grace())]
        args += [f"{sock.fileno()}={node}" for sock, node in held]
        proc = subprocess.Popen(args, **detached.options(pass_fds=[sock.fileno() for sock, _ in held]))
    finally:
        for sock, _ in held:
            sock.close()
    return Gate(proc)


def serve(lab_dir: str, keys: str, grace: int, listeners: dict[int, str]) -> None:
    """Accept on every node's socket; each connection gets ``sshd -i`` inside its node, unless
    :data:`MAX_STARTUPS` sessions started within the last ``grace`` seconds are still not logged in (it is closed)."""
    from . import nodes, state

    lab = os.path.basename(lab_dir.rstrip("/"))
    current = state.read(lab)
    if current is None or not (current.status == "running" or (current.status == "deploying" and current.plan.nodes)):
        raise LabError(f"no lab named '{lab}' is running here (`nestlab inspect --all` lists labs)")
    plan = current.plan
    chooser = selectors.DefaultSelector()
    for fd, node in listeners.items():
        chooser.register(socket.socket(fileno=fd), selectors.EVENT_READ, node)
    woken, waker = socket.socketpair()  # a session's end wakes the loop to reap it
    waker.setblocking(False)
    signal.set_wakeup_fd(waker.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    chooser.register(woken, selectors.EVENT_READ, None)
    command = ["sh", "-c", f'mkdir -p -m 0755 /run/sshd && exec {SSHD} -i -f "{keys}/sshd_config"']
    with_login = ["sh", "-c", LOGIN, "login", SSHD, f"{keys}/sshd_config"]
    sessions: list[tuple[subprocess.Popen[bytes], float]] = []
    while True:
        for key, _ in chooser.select():
            sessions = [(proc, began) for proc, began in sessions if proc.poll() is None]
            if key.data is None:
                woken.recv(4096)
                continue
            listening: socket.socket = key.fileobj  # type: ignore[assignment]  # only sockets are registered with data
            try:
                conn, _ = listening.accept()
            except OSError:
                continue
            now = time.monotonic()
            login = os.path.join(keys, "logins", key.data)
            try:
                if sum(now - began < grace and not _logged_in(proc.pid) for proc, began in sessions) < MAX_STARTUPS:
                    own = os.path.join(keys, "login-keys", key.data)
                    run = [*with_login, login, own, GROUPS, f"{keys}/authorized_keys"] if os.path.exists(login) else command
                    proc = nodes.popen(lab, plan, key.data, run, stdin=conn, stdout=conn, stderr=subprocess.DEVNULL)
                    sessions.append((proc, now))
            except (OSError, LabError):
                pass  # the node is gone or stopped: this connection ends unanswered
            finally:
                conn.close()


def _logged_in(pid: int) -> bool:
    """Whether a session's sshd has let its user in: its process or a descendant is then titled with the user at
    its terminal (``sshd: USER@notty``, ``sshd: USER@pts/0``; from OpenSSH 9.8, ``sshd-session: USER@notty``).
    Not ``sshd: [accepted]``, nor ``sshd: USER [priv]`` or ``[net]``: OpenSSH titles its monitor so as soon as the
    client names a user, before any password."""
    todo, seen = [pid], set[int]()
    while todo and len(seen) < 64:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        title = procs.cmdline(pid).split(b"\0")[0]
        if TITLE.fullmatch(title):
            return True
        todo += procs.children(pid)
    return False


if __name__ == "__main__":
    _dir, _keys_dir, _grace, *pairs = sys.argv[1:]
    serve(_dir, _keys_dir, int(_grace), {int(fd): node for fd, node in (p.split("=", 1) for p in pairs)})
