"""Unit tests of ``operations``: the typed helpers flows perform requests with."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from langgraph_s3.core.index import Query
from langgraph_s3.operations import IndexRequest, S3Get, S3Put, perform, perform_all
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
