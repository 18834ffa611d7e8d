"""Open vSwitch switch nodes: a private ovsdb-server + ovs-vswitchd per switch, inside its namespace.

Every switch gets its own run directory (``/run/nestlab/LAB/ovs/NODE``) with
its database, sockets, pid files and logs, so nestlab never talks to (or
disturbs) a system OVS.  The daemons live in the switch's network namespace,
so removing the namespace's processes stops them.

Datapath: the kernel one when the ``openvswitch`` module can be loaded, else
the userspace ``netdev`` datapath.  On ``netdev``, veth hands OVS TCP packets
whose checksums are not filled in (checksum offload) and the receiver drops
them (``TcpInCsumErrors``); ``other_config:userspace-tso-enable=true``, set
before ovs-vswitchd starts, makes OVS complete them (measured here: TCP fails
without it, ~12 Gbit/s with it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from ... import names
from ...errors import LabError
from ..kernel import namespaces

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")


def run_dir(lab: str, node: str) -> str:
    return os.path.join(names.lab_dir(lab), "ovs", node)


def kernel_datapath_available() -> bool:
    """True when the openvswitch module is loaded or loads (``ovs_datapath`` genetlink family)."""
    if os.path.isdir("/sys/module/openvswitch"):
        return True
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return os.path.isdir("/sys/module/openvswitch")


def _missing_tools() -> list[str]:
    return [t for t in TOOLS if not shutil.which(t)] + ([SCHEMA] if not os.path.exists(SCHEMA) else [])


class Switch:
    """One OVS bridge named after its node, served by daemons in the node's namespace."""

    def __init__(self, lab: str, node: str):
        self.lab, self.node = lab, node
        self.dir = run_dir(lab, node)
        self.db = f"unix:{self.dir}/db.sock"

    def _env(self) -> dict[str, Any]:
        return {**os.environ, **{k: self.dir for k in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR")}}

    def _run(self, *argv: str, inside: bool = False) -> str:
        def call() -> subprocess.CompletedProcess[str]:
            return subprocess.run(argv, capture_output=True, text=True, env=self._env(), timeout=60)

        if inside:
            with namespaces.entered(names.netns_path(self.lab, self.node)):
                proc = call()
        else:
            proc = call()
        if proc.returncode:
            raise LabError(f"OVS switch {self.node}: `{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    def vsctl(self, *args: str) -> str:
        return self._run("ovs-vsctl", f"--db={self.db}", "--timeout=30", *args)

    def start(self, datapath: str, controller: str | None) -> str:
        """Start the daemons and create the bridge; returns the datapath used (``system`` or ``netdev``)."""
        missing = _missing_tools()
        if missing:
            raise LabError(f"kind: ovs needs Open vSwitch ({', '.join(missing)} missing): apt-get install openvswitch-switch")
        use = {"kernel": "system", "netdev": "netdev"}.get(datapath) or ("system" if kernel_datapath_available() else "netdev")
        if use == "system" and not kernel_datapath_available():
            raise LabError(
                f"OVS switch {self.node} asks for datapath: kernel, but the openvswitch module (CONFIG_OPENVSWITCH) is missing; see `nestlab doctor`"
            )
        os.makedirs(self.dir, exist_ok=True)
        self._run("ovsdb-tool", "create", f"{self.dir}/conf.db", SCHEMA)
        self._daemons(use, fresh=True)
        args = [
            "add-br",
            self.node,
            "--",
            "set",
            "bridge",
            self.node,
            f"datapath_type={use}",
            "fail_mode=" + ("secure" if controller else "standalone"),
        ]
        if controller:
            args += ["--", "set-controller", self.node, controller]
        self.vsctl(*args)
        return use

    def resume(self) -> None:
        """Start the daemons again on the switch's database (bridge and ports as they were)."""
        self._daemons("", fresh=False)

    def _daemons(self, datapath: str, fresh: bool) -> None:
        """ovsdb-server, then ovs-vswitchd; a ``fresh`` database is initialised first."""
        self._run(
            "ovsdb-server",
            f"{self.dir}/conf.db",
            f"--remote=punix:{self.dir}/db.sock",
            f"--pidfile={self.dir}/ovsdb-server.pid",
            f"--unixctl={self.dir}/ovsdb-server.ctl",
            f"--log-file={self.dir}/ovsdb-server.log",
            "--detach",
            inside=True,
        )
        if fresh:
            self.vsctl("--no-wait", "init")
            if datapath == "netdev":
                self.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
        self._run(
            "ovs-vswitchd",
            self.db,
            f"--pidfile={self.dir}/ovs-vswitchd.pid",
            f"--unixctl={self.dir}/ovs-vswitchd.ctl",
            f"--log-file={self.dir}/ovs-vswitchd.log",
            "--detach",
            inside=True,
        )

    def add_ports(self, ports: list[str]) -> None:
        args: list[str] = []
        for port in ports:
            args += ["--", "--may-exist", "add-port", self.node, port]
        if args:
            self.vsctl(*args[1:])

    def del_port(self, port: str) -> None:
        self.vsctl("--if-exists", "del-port", self.node, port)

    def add_flows(self, flows: list[str]) -> None:
        for flow in flows:
            self._run("ovs-ofctl", "add-flow", self._mgmt(), flow)

    def _mgmt(self) -> str:
        """The bridge's OpenFlow management socket (ovs-vswitchd creates it shortly after add-br)."""
        deadline = time.monotonic() + 10
        path = f"{self.dir}/{self.node}.mgmt"
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        return f"unix:{path}"

    def info(self) -> dict[str, Any]:
        """Datapath type and checksum handling, read back from the switch's database."""
        datapath = self.vsctl("get", "bridge", self.node, "datapath_type").strip().strip('"')
        tso = self.vsctl("--if-exists", "get", "Open_vSwitch", ".", "other_config:userspace-tso-enable").strip().strip('"')
        return {
            "datapath": datapath,
            "checksums": "userspace-tso" if datapath == "netdev" and tso == "true" else "kernel",
        }
