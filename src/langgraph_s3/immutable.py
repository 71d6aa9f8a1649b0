"""``@immutable``: the core's value classes, frozen for mypy, without dataclasses' import cost.

On Python 3.11 and 3.12 ``dataclass`` compiles each method it generates from source
when the class is made: six for a ``dataclass(frozen=True)`` (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``). Making
the package's dataclasses, 56 of them the core's frozen operations, index requests
and records, was two thirds of ``import langgraph_s3``, paid by every Lambda cold
start (``bench/README.md``, "AsyncS3Saver's cold start: the floor under it").

``@immutable`` makes a dataclass with only ``__init__`` generated. Equality, hashing
and ``repr`` are the three functions below, shared by every such class and giving
what ``dataclass(frozen=True)`` gives: compared and hashed by the fields that take part
(``field(compare=False)`` leaves one out), only against the same class, and shown as
``Name(field=value, ...)``. The runtime guard against assignment is what is given up:
these are the core's own values, which no user code receives to change, and mypy
(``strict``, run by CI) treats the classes as frozen and rejects an assignment to a
field, as it does for ``dataclass(frozen=True)``. Classes users hold (``CrossRegion``,
``Call``, ...) stay ``dataclass(frozen=True)``.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar, dataclass_transform

T = TypeVar("T")


class _Shape(NamedTuple):
    """The names of a class's fields that its ``repr``, ``==`` and ``hash`` use."""

    shown: tuple[str, ...]
    compared: tuple[str, ...]
    hashed: tuple[str, ...]


_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        own = fields(cls)
        shape = _SHAPES[cls] = _Shape(
            tuple(f.name for f in own if f.repr),
            tuple(f.name for f in own if f.compare),
            tuple(f.name for f in own if (f.compare if f.hash is None else f.hash)),
        )
    return shape


def _values(obj: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(obj, name) for name in names)


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shape(type(self)).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _shape(type(self)).compared
    return _values(self, names) == _values(other, names)


def _hash(self: Any) -> int:
    return hash(_values(self, _shape(type(self)).hashed))


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def immutable(cls: type[T]) -> type[T]:
    """Make ``cls`` a dataclass (its ``__init__`` generated; ``==``, ``hash`` and
    ``repr`` by field values, as ``dataclass(frozen=True)``), frozen for type checkers."""
    made = dataclass(repr=False, eq=False)(cls)
    own = cls.__dict__
    # A class's own method stays, as with dataclass; the None that Python puts in
    # __hash__ beside a class's own __eq__ is not one (dataclass hashes it too).
    implicit_hash = own.get("__hash__", 0) is None and "__eq__" in own
    for name, method in (("__repr__", _repr), ("__eq__", _eq), ("__hash__", _hash)):
        if name not in own or (name == "__hash__" and implicit_hash):
            setattr(made, name, method)
    _shape(made)
    return made
