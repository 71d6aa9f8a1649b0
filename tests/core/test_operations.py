"""Unit tests of ``operations``: the typed helpers flows perform requests with."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from langgraph_s3.core.index import Query
from langgraph_s3.operations import (
    Emit,
    Flow,
    IndexRequest,
    S3Get,
    S3Put,
    perform,
    perform_all,
    together,
)
from tests.core.canned import page
from tests.core.script import Script


def test_perform_yields_one_request_and_returns_its_result() -> None:
    script = Script(perform(S3Get("k")))
    script.expect(S3Get("k"), b"body")
    assert script.returns() == b"body"


def test_perform_all_yields_one_batch_and_nothing_for_no_requests() -> None:
    script = Script(perform_all([S3Get("a"), S3Get("b")]))
    script.expect([S3Get("a"), S3Get("b")], [b"A", None])
    assert script.returns() == [b"A", None]
    assert Script(perform_all([])).returns() == []


def test_an_index_request_names_its_call_and_expects_no_error_unless_it_says() -> None:
    query = Query("t", "p")
    assert (query.method, query.params) == query.call()
    assert query.expect == frozenset()
    bare = IndexRequest[None]()
    with pytest.raises(NotImplementedError):
        bare.call()
    with pytest.raises(NotImplementedError):
        bare.result({})
    with pytest.raises(NotImplementedError, match="X"):
        bare.refused("X", {})


def test_requests_compare_by_value_but_not_by_their_futures() -> None:
    assert Query("t", "p", limit=1) == Query("t", "p", limit=1)
    assert Query("t", "p", limit=1) != Query("t", "p", limit=2)
    assert S3Put("k", b"x", done=Future()) == S3Put("k", b"x")


# ------------------------------------------------------------------ together
def two_gets(log: list[str], name: str) -> Flow[list[bytes | None]]:
    """A flow of two round trips (a GET, then a GET of what the first named); ``log``
    says how it ended."""
    try:
        first = yield from perform(S3Get(f"{name}1"))
        second = yield from perform(S3Get(f"{name}{first!r}"))
        return [first, second]
    finally:
        log.append(f"{name} ended")


def one_batch(keys: list[str]) -> Flow[list[bytes | None]]:
    return (yield from perform_all([S3Get(k) for k in keys]))


def test_together_sends_what_both_flows_ask_in_one_round_trip() -> None:
    log: list[str] = []
    script = Script(together(two_gets(log, "a"), one_batch(["x", "y"])))
    script.expect([S3Get("a1"), S3Get("x"), S3Get("y")], [b"A", b"X", None])
    # The batch is done: the other flow goes on alone, its request as it asked it.
    script.expect(S3Get("ab'A'"), b"B")
    assert script.returns() == ([b"A", b"B"], [b"X", None])
    assert log == ["a ended"]


def test_together_with_a_flow_that_asks_nothing_costs_nothing_more() -> None:
    def nothing() -> Flow[str]:
        return "cached"
        yield  # a flow

    script = Script(together(nothing(), perform(Query("t", "p"))))
    script.expect(Query("t", "p"), page([]))  # alone, not in a list
    assert script.returns() == ("cached", page([]))
    assert Script(together(nothing(), nothing())).returns() == ("cached", "cached")


def test_an_error_of_a_combined_round_trip_ends_both_flows() -> None:
    log: list[str] = []
    script = Script(together(two_gets(log, "a"), two_gets(log, "b")))
    assert script.pending == [S3Get("a1"), S3Get("b1")]
    script.throw(ValueError("throttled"))
    assert str(script.raises(ValueError)) == "throttled"
    assert log == ["a ended", "b ended"]  # the second closed: its cleanup ran


def test_an_error_is_given_to_the_second_flow_too_if_the_first_handles_it() -> None:
    def tolerant() -> Flow[str]:
        try:
            yield from perform(S3Get("a"))
        except ValueError:
            return "handled"
        return "answered"

    log: list[str] = []
    script = Script(together(tolerant(), two_gets(log, "b")))
    script.throw(ValueError("throttled"))
    assert str(script.raises(ValueError)) == "throttled"
    assert log == ["b ended"]


def test_closing_together_closes_both_flows_and_an_emit_is_refused() -> None:
    log: list[str] = []
    flow = together(two_gets(log, "a"), two_gets(log, "b"))
    next(flow)
    flow.close()
    assert log == ["a ended", "b ended"]

    def emits() -> Flow[None]:
        yield Emit("tuple")

    with pytest.raises(TypeError, match="may not emit"):
        next(together(emits(), two_gets(log, "c")))
