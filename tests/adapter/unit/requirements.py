"""A minimal selector requirement for table tests (the shape `SelectorRequirement` asks for)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Req:
    key: str
    operator: str
    values: tuple[str, ...] = ()


def req(key: str, operator: str, *values: str) -> Req:
    return Req(key, operator, values)
