"""driving.py: how both drivers step a flow and settle each request's outcome."""

from __future__ import annotations

from collections.abc import Generator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from langgraph_s3.core.index import Query
from langgraph_s3.driving import Clients, Exchange, Steps, client_region
from langgraph_s3.errors import EndpointError, StorageNotFoundError
from langgraph_s3.operations import Emit, S3Get, S3Put
from langgraph_s3.regions import CrossRegion
from langgraph_s3.transport import DYNAMODB, HOME_S3, KMS, S3
from tests.core.canned import make_core


def _flow() -> Generator[Any, Any, str]:
    first = yield "a"
    try:
        yield "b"
    except ValueError as exc:
        second = f"caught {exc}"
    return f"{first}, {second}"


def test_steps_send_results_and_throw_errors_then_keep_the_return_value() -> None:
    steps = Steps(_flow())
    asked = []
    for op in steps:
        asked.append(op)
        steps.answer(1, None) if op == "a" else steps.answer(None, ValueError("no"))
    assert asked == ["a", "b"]
    assert steps.result == "1, caught no"


def test_an_error_the_flow_does_not_handle_reaches_the_driver() -> None:
    steps = Steps(_flow())
    next(steps)
    steps.answer(None, KeyError("lost"))  # thrown at the first yield, outside the try
    with pytest.raises(KeyError):
        next(steps)


def _client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


def test_a_missing_key_is_an_answer_and_settles_the_upload_future() -> None:
    core = make_core()
    get = Exchange(core, S3Get("k"), None)
    assert (get.client_name, get.method, get.reads_body) == (S3, "get_object", True)
    assert get.failed(_client_error("NoSuchKey", "GetObject")) is None

    done: Future[bool] = Future()
    put = Exchange(core, S3Put("k", b"x", done), None)
    assert put.done({}) is None and done.result() is True


def test_a_failed_upload_settles_false_and_raises_our_error_naming_the_region() -> None:
    core = make_core()
    done: Future[bool] = Future()
    put = Exchange(core, S3Put("k", b"x", done), None)
    put.on(SimpleNamespace(meta=SimpleNamespace(region_name="ap-south-1")))
    with pytest.raises(StorageNotFoundError, match="ap-south-1"):
        put.failed(_client_error("NoSuchBucket", "PutObject"))
    assert done.result() is False


def test_the_configured_region_names_the_place_before_the_clients() -> None:
    exchange = Exchange(make_core(region_name="eu-west-1"), Query("t", "t1"), None)
    exchange.on(SimpleNamespace(meta=SimpleNamespace(region_name="ap-south-1")))
    assert exchange.client_name == DYNAMODB and exchange.region == "eu-west-1"


def test_transport_failures_become_our_errors_and_others_pass_through() -> None:
    exchange = Exchange(make_core(), Query("t", "t1"), "http://127.0.0.1:9")
    with pytest.raises(EndpointError, match=r"127\.0\.0\.1:9"):
        exchange.failed(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"))
    with pytest.raises(RuntimeError):
        exchange.failed(RuntimeError("boom"))


def test_index_requests_answer_with_their_typed_result() -> None:
    exchange = Exchange(make_core(), Query("t", "t1"), None)
    page = exchange.done({"Items": [{"pk": {"S": "t1"}}], "LastEvaluatedKey": {"pk": "x"}})
    assert page.items == [{"pk": {"S": "t1"}}] and page.last == {"pk": "x"}


def test_clients_close_only_what_the_saver_created() -> None:
    mine, created = object(), object()
    clients = Clients(mine, None, None)
    assert clients.keep(DYNAMODB, created) is created
    assert clients.forget_created() == [created]
    assert clients.by_name == {S3: mine, DYNAMODB: None, HOME_S3: None, KMS: None}
    assert clients.forget_created() == []


def test_the_home_client_lives_in_the_home_region() -> None:
    cross = CrossRegion(home_region="us-east-1", home_bucket="home-b")
    core = make_core(region_name="eu-west-1", cross_region=cross)
    assert client_region(core, S3) == "eu-west-1"
    assert client_region(core, HOME_S3) == "us-east-1"
    with pytest.raises(AssertionError):
        client_region(make_core(), HOME_S3)


def test_kms_requests_go_to_the_kms_client_of_the_saver_region_and_count_as_kms() -> None:
    from langgraph_s3.operations import KmsDecrypt
    from langgraph_s3.tracing import Stats

    core = make_core(region_name="eu-west-1")
    stats = Stats()
    exchange = Exchange(core, KmsDecrypt(b"w", "k", (("thread", "t"),), "1"), None, stats)
    assert (exchange.client_name, exchange.method) == (KMS, "decrypt")
    assert client_region(core, KMS) == "eu-west-1"
    assert exchange.done({"Plaintext": b"k" * 32}) == b"k" * 32
    assert stats.requests == {"s3": 0, "dynamodb": 0, "kms": 1}


def _emitting() -> Generator[Any, Any, None]:
    yield Emit(1)
    yield Emit(2)
    got = yield "read"
    yield Emit(got)


def test_emitted_results_wait_for_the_driver_and_requests_still_come_in_order() -> None:
    steps = Steps(_emitting())
    assert next(steps) == "read" and steps.emitted() == [1, 2]
    assert steps.emitted() == []
    steps.answer("page", None)
    with pytest.raises(StopIteration):
        next(steps)
    assert steps.emitted() == ["page"]
