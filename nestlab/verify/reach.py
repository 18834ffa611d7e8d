"""``reach:``: the source gets an answer from the target (a ping, or a TCP connection to ``port``), or, with
``expect: false``, gets none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.checks import Reach
from .probing import Probe, run_in, said, target_of
from .targets import Ambiguous

if TYPE_CHECKING:
    from ..lab.lab import Lab


def probe(running: Lab, s: Reach) -> Probe:
    target = target_of(running, s)

    def reach() -> tuple[bool, str]:
        try:
            address, why = target()
        except Ambiguous as exc:  # nothing to try until the check names one address
            return False, str(exc)
        except ValueError as exc:  # no route to any of its addresses: no answer
            target.failed()
            return not s.expect, str(exc)
        rc, out = run_in(running, s.source, _asking(address, s.port), timeout=3)
        answered = rc == 0
        if not answered:
            target.failed()
        elif target.stale:  # it answered where the routes read a moment ago led nowhere (a daemon was late)
            address, why = target(fresh=True)
        seen = f"{'answered' if answered else 'no answer'} from {address}" + (f":{s.port}" if s.port else "") + why
        if not answered:
            seen += ": " + said(out, "Error", "packets transmitted", "ping:")
        return answered == s.expect, seen

    return reach


def _asking(address: str, port: int | None) -> list[str]:
    """The command that asks ``address`` for an answer: a TCP connection to ``port``, else one ping."""
    if port:
        return ["python3", "-c", f"import socket; socket.create_connection(({address!r}, {port}), timeout=1).close()"]
    return ["ping", "-n", "-c1", "-W1", address]
