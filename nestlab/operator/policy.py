"""What an administrator decides at ``nestlab k8s operator install``, which the operator runs with (its
Deployment passes it to ``operator run``)."""

from __future__ import annotations

from dataclasses import dataclass

from .queue import PER_NAMESPACE


@dataclass(frozen=True)
class Policy:
    """What an administrator decides at install, which the operator runs with: the nodes labs' pods may run on
    (``KEY=VALUE`` labels), the Secret types of inputs.WITHHELD a lab may still be given, and how many labs of one
    namespace are reconciled at once."""

    node_selector: tuple[str, ...] = ()
    secret_types: tuple[str, ...] = ()
    per_namespace: int = PER_NAMESPACE

    def args(self) -> list[str]:
        """The policy as ``nestlab k8s operator run``'s options."""
        return [
            *(arg for pair in self.node_selector for arg in ("--node-selector", pair)),
            *(arg for kind in self.secret_types for arg in ("--allow-secret-type", kind)),
            "--labs-per-namespace",
            str(self.per_namespace),
        ]
