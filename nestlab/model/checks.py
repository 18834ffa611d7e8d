"""``checks:``: tool-neutral assertions that a lab works (docs/checks.md), each a mapping with one key
naming what it checks: ``reach``, ``route``, ``ospf``, ``bgp``, ``rate``, ``latency`` or ``command``."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .units import parse_time


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


@dataclass(frozen=True)
class To:
    """A check's ``to:`` read: an address, or a node and optionally one of its interfaces (``NODE:IF``)."""

    text: str
    address: str | None = None
    node: str | None = None
    iface: str = ""  # "": any of the node's

    @classmethod
    def of(cls, text: str) -> To:
        try:
            return cls(text, address=str(ipaddress.ip_address(text)))
        except ValueError:
            node, _, iface = text.partition(":")
            return cls(text, node=node, iface=iface)


class _Between(_Strict):
    """A check from one node to another node (the address of it a packet reaches) or an address."""

    source: str = Field(alias="from", description="the node the check runs in")
    to: str = Field(
        description="an address, or a node (NODE, or NODE:IF for one interface): the address of it a packet from the source reaches"
    )

    @property
    def target(self) -> To:
        return To.of(self.to)


class Reach(_Between):
    expect: bool = Field(default=True, description="false: the check holds while there is no answer")
    port: int | None = Field(default=None, ge=1, le=65535, description="a TCP connect to this port instead of a ping")

    def title(self) -> str:
        return f"{self.source} {'reaches' if self.expect else 'does not reach'} {self.to}" + (
            f":{self.port}" if self.port else ""
        )


class Route(_Strict):
    node: str
    prefix: str
    via: str | None = Field(default=None, description="a next hop the route must have")
    vrf: str | None = None

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_network(value, strict=False))
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a prefix such as 10.0.0.0/24 ({exc})") from None

    def title(self) -> str:
        return (
            f"{self.node} routes {self.prefix}"
            + (f" via {self.via}" if self.via else "")
            + (f" in vrf {self.vrf}" if self.vrf else "")
        )


class Ospf(_Strict):
    node: str
    neighbor: str = Field(description="the neighbor's router ID")
    state: str = "Full"

    def title(self) -> str:
        return f"{self.node} has OSPF neighbor {self.neighbor} {self.state}"


class Bgp(_Strict):
    node: str
    peer: str = Field(description="the peer's address")
    state: str = "Established"

    def title(self) -> str:
        return f"{self.node} has BGP peer {self.peer} {self.state}"


class Rate(_Between):
    mbit: float = Field(gt=0, description="the rate expected (iperf3, TCP, 2 s)")
    tolerance: str = Field(default="20%", description="how far off it may be: a percentage or Mbit/s")

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, value: str) -> str:
        if not re.fullmatch(r"\d+(\.\d+)?%?", str(value)):
            raise ValueError(f"'{value}' is not a tolerance such as 20% or 5 (Mbit/s)")
        return str(value)

    def allowed(self) -> float:
        """The tolerance in Mbit/s."""
        return self.mbit * float(self.tolerance[:-1]) / 100 if self.tolerance.endswith("%") else float(self.tolerance)

    def title(self) -> str:
        return f"{self.source} -> {self.to} carries {self.mbit:g} Mbit/s ± {self.tolerance}"


class Latency(_Between):
    ms: float = Field(ge=0, description="the round-trip time expected (ping's average)")
    tolerance: str = Field(default="2ms", description="how far off it may be: a time (2ms) or a percentage")

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, value: str) -> str:
        text = str(value)
        if not text.endswith("%"):
            parse_time(text)
        elif not re.fullmatch(r"\d+(\.\d+)?%", text):
            raise ValueError(f"'{value}' is not a tolerance such as 2ms or 10%")
        return text

    def allowed(self) -> float:
        """The tolerance in ms."""
        return self.ms * float(self.tolerance[:-1]) / 100 if self.tolerance.endswith("%") else parse_time(self.tolerance) / 1000

    def title(self) -> str:
        return f"{self.source} -> {self.to} round trip {self.ms:g} ms ± {self.tolerance}"


class Command(_Strict):
    node: str
    run: str = Field(description="a shell command run in the node")
    exit: int | None = Field(default=0, description="the exit code it must end with (null: any)")
    output: str | None = Field(default=None, description="a regular expression its output must match (re.search, multiline)")

    @field_validator("output")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"'{value}' is not a regular expression ({exc})") from None
        return value

    def title(self) -> str:
        return f"{self.node}: {self.run}"


Kind = Literal["reach", "route", "ospf", "bgp", "rate", "latency", "command"]
KINDS: tuple[Kind, ...] = ("reach", "route", "ospf", "bgp", "rate", "latency", "command")


class Check(_Strict):
    """One check: exactly one of its kinds, and an optional ``name``."""

    name: str | None = None
    reach: Reach | None = None
    route: Route | None = None
    ospf: Ospf | None = None
    bgp: Bgp | None = None
    rate: Rate | None = None
    latency: Latency | None = None
    command: Command | None = None

    @model_validator(mode="after")
    def _one(self) -> Check:
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a check is one of {', '.join(KINDS)} (this one has {', '.join(given) or 'none'})")
        return self

    @property
    def kind(self) -> Kind:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def spec(self) -> Reach | Route | Ospf | Bgp | Rate | Latency | Command:
        spec: Reach | Route | Ospf | Bgp | Rate | Latency | Command = getattr(self, self.kind)
        return spec

    def nodes(self) -> list[str]:
        """The nodes it names (``to`` only when it is a node's name: it may be an address)."""
        spec = self.spec
        return [n for n in (getattr(spec, "source", None), getattr(spec, "node", None)) if n]

    def title(self) -> str:
        """A line naming it (the JUnit testcase's name)."""
        return self.name or self.spec.title()
