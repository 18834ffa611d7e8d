"""``SRC:DST[:ro|rw]`` split once, where the file is read: the model checks a node's ``binds:`` and makes
their sources absolute (model/binds.py), the planner mounts them, the Kubernetes site ships their sources."""

from __future__ import annotations

from typing import Any

MODES = ("ro", "rw")


class Bind(str):
    """A bind as written (it is that string: ``str(b)``, JSON, YAML), with its parts: ``source``,
    ``target`` and ``mode`` (``ro``, ``rw`` or empty); ``valid``: it has that shape (the model says
    where it has not, with its line)."""

    source: str
    target: str
    mode: str
    valid: bool

    def __new__(cls, text: str) -> Bind:
        if type(text) is cls:
            return text
        self = super().__new__(cls, text)
        parts = str.split(text, ":")
        self.source, self.target, self.mode = (*parts, "", "")[:3]
        self.valid = len(parts) in (2, 3) and all(parts[:2]) and (len(parts) == 2 or self.mode in MODES)
        return self

    def __getnewargs__(self) -> tuple[str]:  # copy and pickle build it again from its text
        return (str(self),)

    @classmethod
    def of(cls, source: str, target: str, mode: str = "") -> Bind:
        return cls(":".join([source, target, *([mode] if mode else [])]))

    @property
    def read_only(self) -> bool:
        return self.mode == "ro"

    @classmethod
    def __get_pydantic_core_schema__(cls, _source: Any, _handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(), serialization=core_schema.plain_serializer_function_ser_schema(str)
        )
