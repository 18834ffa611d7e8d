"""The machines a lab is on: emulated hosts and the wires between their NICs, and the servers a lab is split
across with the VXLAN that stitches them."""

from __future__ import annotations

import ipaddress
from typing import Any, NamedTuple

from pydantic import Field, field_validator

from ..endpoint import Endpoint
from ..units import parse_rate
from .base import Strict, net_sysctls, parsed_by


class Nic(NamedTuple):
    """A host's NIC, as a wire's endpoint ``HOST:NIC`` names it."""

    host: str
    name: str


class WireParams(Strict):
    rate: str | None = Field(default=None, description="e.g. 10gbit, 100mbit (default: unshaped)")
    mtu: int | None = Field(default=None, ge=68, le=65535)

    _rate = parsed_by(parse_rate, "rate")


class WireSpec(Strict):
    """A cable (two endpoints) or a switch (one, or three and more) between hosts' NICs ``HOST:NIC``."""

    endpoints: list[Endpoint] = Field(min_length=1)
    params: WireParams = Field(default_factory=WireParams)
    ipv4: list[str | None] | None = None

    @field_validator("ipv4")
    @classmethod
    def _addresses(cls, value: Any) -> Any:
        for cidr in value or []:
            if cidr is None:
                continue
            try:
                ipaddress.IPv4Interface(cidr)
            except ValueError:
                raise ValueError(f"'{cidr}' is not an IPv4 address with a prefix length, e.g. 10.1.0.1/24") from None
            if "/" not in cidr:
                raise ValueError(f"'{cidr}' needs a prefix length, e.g. {cidr}/24")
        return value


class HostSpec(Strict):
    """An emulated physical machine: a namespace whose NICs come from ``wires:``."""

    sysctls: dict[str, str | int] = Field(default_factory=dict, description="net.* sysctls of the host")

    _net_only = parsed_by(net_sysctls, "sysctls")


class ServerSpec(Strict):
    """A machine a lab is split across (docs/servers.md): reached over SSH, running nestlab itself."""

    address: str = Field(description="where SSH reaches it (name or IP)")
    user: str = Field(default="root", description="SSH user (nestlab runs as root there)")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port")
    key: str | None = Field(default=None, description="SSH identity file (relative to the file that names it)")
    weight: float = Field(default=1.0, gt=0, description="its share of the nodes, relative to the other servers'")
    nestlab: str = Field(default="nestlab", description="the nestlab command on that server")
    underlay: str | None = Field(default=None, description="its IPv4 address for VXLAN between servers (default: address)")
    ssh_options: list[str] = Field(default_factory=list, description="extra ssh -o options, e.g. UserKnownHostsFile=...")

    @field_validator("underlay")
    @classmethod
    def _underlay(cls, value: Any) -> Any:
        if value is not None:
            ipaddress.IPv4Address(value)
        return value


class Stitch(Strict):
    """How links cut between servers are joined: VXLAN on ``port``, VNIs counted from ``vni``."""

    port: int = Field(default=4789, ge=1, le=65535, description="UDP port of the VXLAN tunnels between servers")
    vni: int = Field(default=100000, ge=1, le=16000000, description="the first VNI of the lab's range (one per cut link)")
    mtu: int = Field(default=1500, ge=1280, le=65535, description="the underlay's MTU; stitched links get 50 bytes less")
