"""ovs: a veth pair whose switch end is a port of a ``kind: ovs`` node (added as a port by the switch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import KINDS
from .base import register
from .veth import Veth

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plugins import Checking


class Ovs(Veth):
    name = "ovs"
    summary = "a veth pair with one end a port of a kind: ovs switch (chosen by itself for such links)"

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        ends = [ep.node for ep in link.endpoints]
        if not any(KINDS.get(ctx.kind(end)).link_mode == self.name for end in ends):  # a switch whose ports these links are
            return [ctx.problem(path + ("mode",), "mode: ovs needs one endpoint on a kind: ovs node")]
        return super().check(ctx, link, path)


register(Ovs())
