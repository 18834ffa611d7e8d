"""What every part of the topology's schema shares: a model that refuses keys it does not declare, the
rule for a name, and validators made of the model's parsers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"


def net_sysctls(value: dict[str, Any]) -> dict[str, Any]:
    """Refuses a sysctl that is not per network namespace (net.*)."""
    for key in value:
        if not key.startswith("net."):
            raise ValueError(f"'{key}' is not per-namespace; a node or host may set only net.* sysctls")
    return value


def parsed_by(parser: Callable[[Any], object], *fields: str) -> Any:
    """A field validator that lets ``parser`` reject a value (its ValueError becomes the message)."""

    def check(cls: type[Any], value: Any) -> Any:
        if value is not None:
            parser(value)
        return value

    return field_validator(*fields)(classmethod(check))


class Strict(BaseModel):
    """A part of the file: a key it does not declare is an error."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
