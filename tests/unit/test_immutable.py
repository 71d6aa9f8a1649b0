"""``@immutable``: value semantics of ``dataclass(frozen=True)``, frozen for mypy."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from langgraph_s3.core.index.writes import PutNew, Replace
from langgraph_s3.immutable import immutable

SRC = Path(__file__).resolve().parents[2] / "src"


@immutable
class Point:
    x: int
    y: int = 0
    label: str = dataclasses.field(default="", compare=False)
    secret: bytes = dataclasses.field(default=b"", repr=False)
    cache: dict[str, int] = dataclasses.field(default_factory=dict, hash=False)


@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    x: int
    y: int = 0
    label: str = dataclasses.field(default="", compare=False)
    secret: bytes = dataclasses.field(default=b"", repr=False)
    cache: dict[str, int] = dataclasses.field(default_factory=dict, hash=False)


@immutable
class Named:
    name: str

    def __repr__(self) -> str:
        return f"<{self.name}>"


@immutable
class Caseless:
    name: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Caseless) and other.name.lower() == self.name.lower()


@dataclasses.dataclass(frozen=True)
class FrozenCaseless:
    name: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenCaseless) and other.name.lower() == self.name.lower()


@immutable
class Keyed:
    key: str
    note: str = dataclasses.field(default="", compare=False, hash=True)


@immutable
class Node:
    children: list[Node] = dataclasses.field(default_factory=list)


def test_equality_and_hash_follow_the_compared_fields_as_frozen_dataclasses_do() -> None:
    a = Point(1, 2, label="a", secret=b"s")
    assert a == Point(1, 2, label="b", secret=b"s")  # label: compare=False
    assert a != Point(1, 3) and a != Point(2, 2)
    assert hash(a) == hash(Point(1, 2, label="b", secret=b"s"))
    assert len({a, Point(1, 2, secret=b"s"), Point(1, 3)}) == 2
    # The frozen dataclass of the same fields agrees on every pair.
    pairs = [((1, 2, "a"), (1, 2, "b")), ((1, 2, "a"), (1, 3, "a")), ((0, 0, ""), (0, 0, ""))]
    for left, right in pairs:
        ours = Point(*left) == Point(*right)
        assert ours == (FrozenPoint(*left) == FrozenPoint(*right))
        assert (hash(Point(*left)) == hash(Point(*right))) is ours
    counted, twin = Point(1, 2, cache={"k": 1}), Point(1, 2, cache={"k": 2})
    assert counted != twin and hash(counted) == hash(twin)  # cache: compared, not hashed


def test_only_the_same_class_compares_equal() -> None:
    item = {"pk": {"S": "t"}}
    assert PutNew("table", item) == PutNew("table", item)
    assert PutNew("table", item) != Replace("table", item)  # siblings of one base
    assert Point(1) != (1, 0) and Point(1).__eq__((1, 0)) is NotImplemented
    assert FrozenPoint(1) != Point(1)


def test_repr_is_the_frozen_dataclass_repr() -> None:
    a = Point(1, 2, label="l", secret=b"hidden", cache={"k": 1})
    b = FrozenPoint(1, 2, label="l", secret=b"hidden", cache={"k": 1})
    assert repr(a) == repr(b).replace("FrozenPoint", "Point")
    assert "hidden" not in repr(a)


def test_a_class_keeps_its_own_methods() -> None:
    assert repr(Named("n")) == "<n>"
    assert Named("n") == Named("n")
    # Its own __eq__ is kept, and it is hashed by its fields as the frozen twin is
    # (the None Python sets beside an own __eq__ does not count as an own __hash__).
    assert Caseless("A") == Caseless("a") and FrozenCaseless("A") == FrozenCaseless("a")
    assert hash(Caseless("a")) == hash(FrozenCaseless("a")) == hash(("a",))


def test_a_field_hashed_but_not_compared_counts_only_for_the_hash() -> None:
    assert Keyed("k", note="x") == Keyed("k", note="y")
    assert hash(Keyed("k", note="x")) == hash(("k", "x")) != hash(Keyed("k", note="y"))


def test_repr_of_a_value_that_contains_itself_ends() -> None:
    node = Node()
    node.children.append(node)
    assert repr(node) == "Node(children=[...])"


def test_it_is_a_dataclass_for_the_dataclasses_module() -> None:
    a = Point(1, 2)
    assert dataclasses.is_dataclass(a)
    assert [f.name for f in dataclasses.fields(a)] == ["x", "y", "label", "secret", "cache"]
    assert dataclasses.replace(a, y=5) == Point(1, 5)
    assert Point.__match_args__ == ("x", "y", "label", "secret", "cache")
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_mypy_treats_the_classes_as_frozen(tmp_path: Path) -> None:
    # The runtime check is what @immutable gives up; this is the check left.
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            from langgraph_s3.immutable import immutable

            @immutable
            class Local:
                x: int

            Local(1).x = 2
            """
        )
    )
    env = {**os.environ, "MYPYPATH": str(SRC)}
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    lines = run.stdout.splitlines()
    assert any('Property "x" defined in "Local" is read-only' in line for line in lines), run.stdout
