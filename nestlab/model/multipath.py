"""The keys of an mpt link's ``multipath:`` (links/mpt.py: the tunnel), as the schema checks them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Datapath = Literal["auto", "bpf", "user"]


class MultipathSpec(BaseModel):
    """A multipath tunnel (``nestlab-mpt``, GRE-in-UDP) over parallel paths between the link's two nodes."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["mpt"] = "mpt"
    paths: list[str] | None = Field(
        default=None, description="interfaces both nodes have, one per path (default: the bundle's p1..pN)"
    )
    weights: list[int] | None = Field(default=None, description="packets per round on each path (default 1 each)")
    scheduler: Literal["wrr", "hash"] = Field(default="wrr", description="wrr: per packet, weighted round robin; hash: per flow")
    datapath: Datapath | tuple[Datapath, Datapath] = Field(
        default="auto",
        description="bpf: tc programs carry IPv4 in the kernel; user: the daemon reads every packet; auto: bpf where the kernel "
        "allows; [A, B]: each end its own",
    )

    @field_validator("weights")
    @classmethod
    def _positive(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(w < 1 for w in value):
            raise ValueError("weights are positive integers")
        return value
