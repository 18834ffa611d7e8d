"""The management network (``mgmt:``) and who logs in to the nodes over SSH (``credentials:``)."""

from __future__ import annotations

from typing import Self

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ...names import IFNAMSIZ
from .. import credentials
from .base import NAME_PATTERN, Strict


class Credentials(Strict):
    """containerlab's ``credentials:`` (docs/management.md): who logs in over SSH; each key falls back
    separately, node > group > kind > defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    username: str | None = Field(default=None, description="a POSIX user name (not root with a password)")
    password: str | None = Field(default=None, min_length=1)
    identity_file: str | None = Field(default=None, alias="identity-file", description="private key for the ssh config")

    @field_validator("username")
    @classmethod
    def _username(cls, value: str | None) -> str | None:
        if value is not None and (problem := credentials.username_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("password", "identity_file")
    @classmethod
    def _one_line(cls, value: str | None, info: ValidationInfo) -> str | None:
        field = info.field_name or ""  # always set for a field validator
        forbidden = credentials.IN_QUOTES if field == "identity_file" else credentials.LINE_BREAKS
        if value is not None and (problem := credentials.text_problem(value, field.replace("_", "-"), forbidden)):
            raise ValueError(problem)
        if info.field_name == "password" and value is not None and len(value.encode()) > 256:
            raise ValueError("password is longer than 256 bytes (openssl passwd -6 would cut it short)")
        return value

    @model_validator(mode="after")
    def _never_root(self) -> Self:
        if self.username == "root" and self.password:
            raise ValueError("a password login is never root: name another user (root logs in with the lab's key)")
        return self


class MgmtSpec(Strict):
    """The management network (containerlab's ``mgmt:``): every node's eth0 on a bridge of this machine."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    network: str = Field(default="clab", pattern=NAME_PATTERN, max_length=40, description="labs naming one network share it")
    ipv4_subnet: str = Field(default="172.20.20.0/24", alias="ipv4-subnet")
    ipv6_subnet: str = Field(default="3fff:172:20:20::/64", alias="ipv6-subnet")
    ipv4_gw: str | None = Field(default=None, alias="ipv4-gw", description="the bridge's address (default: the subnet's first)")
    ipv6_gw: str | None = Field(default=None, alias="ipv6-gw")
    ipv4_range: str | None = Field(default=None, alias="ipv4-range", description="automatic addresses come from here")
    ipv6_range: str | None = Field(default=None, alias="ipv6-range")
    bridge: str | None = Field(default=None, max_length=IFNAMSIZ, description="the bridge's name (default: br-NETWORK)")
    mtu: int = Field(default=1500, ge=68, le=65535)
    external_access: bool = Field(default=True, alias="external-access", description="nodes reach out through NAT")
    skip_when_unused: bool = Field(default=False, alias="skip-when-unused")
    driver_opts: dict[str, str] = Field(default_factory=dict, alias="driver-opts")
