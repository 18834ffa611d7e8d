"""mpt: a multipath tunnel (``nestlab-mpt``, GRE-in-UDP over a tun device) over parallel paths between two nodes.

A daemon in each end's node carries the link; its tun device goes with the process, so stopping
the daemon removes the link.  The tunnel starts after every path has its addresses.  Where the
kernel allows, the daemon's tc programs carry the packets (``datapath: bpf``, docs/multipath.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from ..model.units import parse_rate
from ..plan.objects import LinkObj
from ..plugins import Keys
from .base import LinkMode, Stage, register

if TYPE_CHECKING:
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import AttachObj, EndObj
    from ..plugins import Applying, Planning

OVERHEAD = 32  # outer IPv4 + UDP + GRE headers (RFC 8086)
BURST_TIME = 0.0013  # seconds of its slowest path a TCP burst (GSO) may take, sent whole down one path


def burst(rates: list[int]) -> int:
    """The most bytes one TCP burst (GSO) through the tunnel may hold, so that the kernel datapath's bursts,
    each sent whole down one path, spread finely enough: about 1.3 ms of the slowest path's ``rates``
    (bits/s), a power of two in 4-64 KiB; 64 KiB over unshaped paths.  12 x 100 Mbit/s: 16 KiB, which
    carried 92.6 % of the paths against 88 % with 64 KiB bursts (docs/multipath.md)."""
    if not rates:
        return 65536
    return max(4096, min(65536, 1 << round(math.log2(min(rates) / 8 * BURST_TIME))))


def _keys() -> dict[str, tuple[Any, dict[str, Any]]]:
    """The mode's key, its type a pydantic model (model/multipath.py), loaded when a topology is checked."""
    from ..model.multipath import MultipathSpec

    return {
        "multipath": (
            MultipathSpec | None,
            {"default": None, "description": "an MPT tunnel over the paths; see docs/multipath.md"},
        )
    }


class Mpt(LinkMode):
    name = "mpt"
    summary = "a nestlab-mpt multipath tunnel over parallel paths (multipath:, or paths: N with multipath:)"
    stage = Stage.DAEMON
    options = Keys(_keys)

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        """The tunnel between a and b over the links named in ``multipath.paths`` (built before it)."""
        a, z = ends
        mp = link.multipath
        paths, mtus, rates = [], [], []
        for i, name in enumerate(mp.paths):
            path = b.plan.links.get(f"{a.node}:{name}={z.node}:{name}") or b.plan.links.get(f"{z.node}:{name}={a.node}:{name}")
            if path is None:
                b.fail(f"mpt path {name} between {a.node} and {z.node} is not a link of the lab")
            near, far = (path.a, path.b) if path.a.node == a.node else (path.b, path.a)
            if not (near.ipv4 and far.ipv4):
                b.fail(f"mpt path {name} between {a.node} and {z.node} has no IPv4 addresses")
            paths.append((name, near.ipv4[0].split("/")[0], far.ipv4[0].split("/")[0], mp.weights[i] if mp.weights else 1))
            mtus.append(path.mtu or 1500)
            rates += [parse_rate(shape["rate"]) for shape in (dict(path.shape_a), dict(path.shape_b)) if "rate" in shape]
        return LinkObj(
            a,
            z,
            link.mtu or min(mtus) - OVERHEAD,
            self.name,
            options=(
                ("burst", burst(rates)),
                ("datapath", ",".join(mp.datapath) if isinstance(mp.datapath, tuple) else mp.datapath),
                ("scheduler", mp.scheduler),
            ),
            paths=tuple(paths),
        )

    def needs(self, link: LinkObj | AttachObj) -> set[str]:
        return set()

    def machine_root(self, obj: LinkObj | AttachObj) -> str | None:
        """The kernel datapath: its tc programs need CAP_BPF on the machine."""
        if isinstance(obj, LinkObj) and "bpf" in obj.text("datapath", "auto").split(","):
            return "datapath: bpf, whose tc programs need CAP_BPF on the machine"
        return super().machine_root(obj)

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.services import mpt_daemon

        for link in objs:
            made.append(link)
            mpt_daemon.start(ap.lab, link, ap.popen)

    def counters(self, lab: str, link: LinkObj, end: EndObj) -> dict[str, Any] | None:
        """The daemon's datapath and per-path packets and bytes (the kernel datapath's included)."""
        from ..backends.services import mpt_daemon

        try:
            return mpt_daemon.counters(lab, end.node, end.iface)
        except (OSError, ValueError, LabError):  # a daemon just stopped or starting: nothing to show
            return None

    def delete(self, ap: Applying, link: LinkObj | AttachObj, quiet: bool) -> None:
        """A daemon's tun device goes with the daemon."""
        from ..backends.services import mpt_daemon

        assert isinstance(link, LinkObj), "mpt joins two endpoints"
        mpt_daemon.stop(ap.lab, link)


register(Mpt())
