"""Unit tests of ``operations``: the typed helpers flows perform requests with."""

from __future__ import annotations

import pytest

from langgraph_s3.operations import Ddb, DdbFailure, S3Get, perform, perform_all, response
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


def test_response_passes_a_response_and_refuses_a_failure() -> None:
    assert response({"Items": []}) == {"Items": []}
    with pytest.raises(AssertionError):
        response(DdbFailure("ConditionalCheckFailedException", {}))


def test_requests_compare_by_value_but_not_by_their_futures() -> None:
    assert Ddb("query", {"a": 1}) == Ddb("query", {"a": 1})
    assert Ddb("query", {"a": 1}) != Ddb("query", {"a": 1}, expect=frozenset({"X"}))
