"""A link of the topology file: its endpoints, addresses and shaping, and every key a mode of nestlab/links adds."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, create_model, field_validator, model_validator

from ...registry import LINK_MODES
from .. import shape_keys
from ..endpoint import Endpoint
from .base import Strict, parsed_by

if TYPE_CHECKING:  # words of the registry and of shape_keys, known once they load: words for the type checker
    LinkMode = str
    Qdisc = str
    Distribution = str
    LinkState = str
else:
    # How a link endpoint is attached: a word of the link-mode registry (nestlab/links, docs/modes.md).
    LinkMode = Literal[tuple(LINK_MODES.words())]
    Qdisc = Literal[*shape_keys.QDISCS]
    Distribution = Literal[*shape_keys.DISTRIBUTIONS]
    LinkState = Literal[*shape_keys.STATES]
IGNORED_LINK_KEYS = {"vars": "link vars feed templates, which nestlab does not render", "labels": "link labels are not used"}


class Shape(Strict):
    """What one direction of a link does to packets (the sending endpoint's egress)."""

    rate: str | None = Field(default=None, description="1kbit..400gbit, HTB with 64-bit rates")
    qdisc: Qdisc | None = Field(default=None, description="what enforces the rate: htb (default) or tbf (up to 34gbit)")
    burst: str | int | None = Field(default=None, description="HTB burst, e.g. 64kb (default: rate/HZ + MTU)")
    queue: int | None = Field(default=None, ge=1, description="queue length in packets")
    delay: str | None = Field(default=None, description="e.g. 20ms (netem)")
    jitter: str | None = Field(default=None, description="e.g. 5ms, needs delay (netem)")
    distribution: Distribution | None = Field(default=None, description="of the jitter (netem; default uniform)")
    loss: str | float | None = Field(default=None, description="e.g. 10% (netem)")
    loss_correlation: str | float | None = None
    corrupt: str | float | None = None
    duplicate: str | float | None = None
    reorder: str | float | None = Field(default=None, description="share of packets sent early, needs delay (netem)")
    gemodel: str | None = Field(
        default=None, description="Gilbert-Elliott bursty loss, 'P R [1-H [1-K]]' as tc writes it, e.g. '5% 20%' (netem)"
    )
    trace: str | None = Field(
        default=None, description="a Mahimahi delivery trace (one line per 1500-byte opportunity, in ms), replayed in a loop"
    )

    _rate = parsed_by(shape_keys.PARSERS["rate"], "rate")
    _burst = parsed_by(shape_keys.PARSERS["burst"], "burst")
    _times = parsed_by(shape_keys.PARSERS["delay"], "delay", "jitter")
    _shares = parsed_by(shape_keys.PARSERS["loss"], "loss", "loss_correlation", "corrupt", "duplicate", "reorder")
    _gemodel = parsed_by(shape_keys.PARSERS["gemodel"], "gemodel")


class LinkParams(Shape):
    """Shaping for both directions; ``a:``/``b:`` override it for what that endpoint sends."""

    @model_validator(mode="after")
    def _tbf_rate(self) -> Self:
        for shape in (self, self.a, self.b):
            if shape is not None and (wrong := shape_keys.tbf_problem(shape.qdisc or self.qdisc, shape.rate)):
                raise ValueError(f"qdisc: {wrong}")
        return self

    state: LinkState | None = None
    a: Shape | None = None
    b: Shape | None = None


class _LinkBase(Strict):
    """How endpoints ``NODE:IFACE`` are connected; ``ipv4``/``ipv6`` list one entry per endpoint.

    Two endpoints: a veth (or an overlay such as ``mode: vxlan``, an OVS port when one end is
    a ``kind: ovs`` node).  One endpoint: an attachment to its host (``mode: bridge|macvlan|...``),
    usually on a host NIC ``parent``.  The keys of each mode come from its module in nestlab/links.
    """

    endpoints: list[Endpoint] = Field(min_length=1, max_length=2)
    parent: str | None = Field(default=None, description="HOST:NIC the attachment sits on, e.g. server:nic0")
    ipv4: list[str | None] | None = None
    ipv6: list[str | None] | None = None
    mtu: int | None = Field(default=None, ge=68, le=65535)
    params: LinkParams | None = Field(default=None, description="rate, delay, loss... (see docs/shaping.md)")
    paths: int | None = Field(
        default=None, ge=1, le=64, description="endpoints are two nodes: N parallel links NODE:p1..pN, each its own subnet"
    )
    macs: list[str | None] | None = Field(
        default=None, description="veth: each endpoint's MAC address (containerlab's endpoint mac:), null for the kernel's choice"
    )

    @field_validator("macs")
    @classmethod
    def _macs(cls, value: Any) -> Any:
        for mac in value or []:
            if mac is not None and (not re.match(r"^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$", mac) or int(mac[:2], 16) & 1):
                raise ValueError(f"'{mac}' is not a unicast MAC address such as 02:00:00:00:00:01")
        return value

    @field_validator("mode", check_fields=False)
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        """A mode's older word (``host`` for ``machine-veth``) is the mode."""
        return LINK_MODES.canonical(value) if value else value

    @field_validator("endpoints", mode="before")
    @classmethod
    def _extended_form(cls, value: Any) -> Any:
        """Accept containerlab's extended endpoint form ``{node: h1, interface: eth1}``."""
        if isinstance(value, list):
            return [
                f"{ep.get('node')}:{ep.get('interface')}"
                if isinstance(ep, dict) and set(ep) <= {"node", "interface", "mac"}
                else ep
                for ep in value
            ]
        return value


def _mode_options() -> dict[str, Any]:
    """Every key a link mode owns, with its schema (a key several modes share is declared alike by each)."""
    return {
        key: (annotation, Field(**field)) for mode in LINK_MODES.values() for key, (annotation, field) in mode.options.items()
    }


if TYPE_CHECKING:  # for the type checker: the common keys, and a mode's own keys as Any

    class LinkSpec(_LinkBase):
        mode: str | None = None

        def __init__(self, **data: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...
else:
    LinkSpec = create_model(
        "LinkSpec", __base__=_LinkBase, __doc__=_LinkBase.__doc__, mode=(LinkMode | None, None), **_mode_options()
    )
