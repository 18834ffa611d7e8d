"""``NODE:IFACE`` split once, where it is read: a link's endpoints in the file, a wire's ``HOST:NIC``,
and the references people type (``nestlab capture r1:eth1``) are all parsed here."""

from __future__ import annotations

from typing import Any


class Endpoint(str):
    """An endpoint as written (it is that string: ``str(ep)``, JSON, YAML), with its parts: ``node``
    (``drone1/gnab`` for a component), ``iface`` (empty if it has none: the model says so, with its
    line), ``key`` (the two as a pair) and ``top`` (the node a component belongs to)."""

    node: str
    iface: str

    def __new__(cls, text: str) -> Endpoint:
        if type(text) is cls:
            return text
        self = super().__new__(cls, text)
        self.node, _, self.iface = str.partition(text, ":")
        return self

    def __getnewargs__(self) -> tuple[str]:  # copy and pickle build it again from its text
        return (str(self),)

    @property
    def key(self) -> tuple[str, str]:
        return (self.node, self.iface)

    @property
    def top(self) -> str:
        return self.node.partition("/")[0]

    @property
    def whole(self) -> bool:
        """It names both a node and an interface."""
        return bool(self.node and self.iface)

    @classmethod
    def __get_pydantic_core_schema__(cls, _source: Any, _handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(), serialization=core_schema.plain_serializer_function_ser_schema(str)
        )
