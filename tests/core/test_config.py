"""Unit tests of ``core.config``: saver settings and the configs LangGraph passes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from langgraph_s3.core import check_options
from langgraph_s3.core.config import check_settings, checkpoint_id_of, thread_ns
from langgraph_s3.core.state import SaverCore
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.regions import CrossRegion

GOOD: dict[str, Any] = {
    "bucket": "b",
    "table": "t",
    "compression_level": 3,
    "inline_threshold": 0,
    "index_inline_limit": 0,
    "max_concurrency": 1,
    "region_name": None,
    "cross_region": None,
}


def test_known_options_pass_and_an_unknown_one_is_named_with_the_closest_valid_one() -> None:
    check_options(SaverCore, {"inline_threshold": 1, "clock": lambda: 0.0})
    with pytest.raises(InvalidConfigError, match="did you mean 'inline_threshold'"):
        check_options(SaverCore, {"inline_treshold": 1})
    with pytest.raises(InvalidConfigError, match="unknown option 'zzz': valid options are") as err:
        check_options(SaverCore, {"zzz": 1})
    assert "did you mean" not in str(err.value) and "bucket" in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bucket": ""}, "bucket is required"),
        ({"table": None}, "table is required"),
        ({"compression_level": 23}, "compression_level"),
        ({"compression_level": "3"}, "compression_level"),
        ({"inline_threshold": -1}, "inline_threshold"),
        ({"index_inline_limit": 65537}, "index_inline_limit"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"cross_region": CrossRegion("us-east-1")}, "region_name"),
    ],
)
def test_a_setting_the_saver_cannot_work_with_is_refused(
    change: dict[str, Any], message: str
) -> None:
    check_settings(**GOOD)
    with pytest.raises(InvalidConfigError, match=message):
        check_settings(**{**GOOD, **change})


def test_a_config_names_a_thread_and_namespace() -> None:
    assert thread_ns({"configurable": {"thread_id": "t", "checkpoint_ns": "n"}}) == ("t", "n")
    assert thread_ns({"configurable": {"thread_id": 7}}) == ("7", "")
    tid = uuid.uuid4()
    assert thread_ns({"configurable": {"thread_id": tid}}) == (str(tid), "")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "must be a dict"),
        ({"configurable": "t"}, "must be a dict"),
        ({"configurable": {}}, "thread_id.*is required"),
        ({"configurable": {"thread_id": True}}, "thread_id must be a string"),
        ({"configurable": {"thread_id": 1.5}}, "thread_id must be a string"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": 3}}, "checkpoint_ns"),
    ],
)
def test_a_config_without_a_usable_thread_is_refused(config: Any, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        thread_ns(config)


def test_a_checkpoint_id_is_checked_when_given() -> None:
    assert checkpoint_id_of({"configurable": {"thread_id": "t"}}) is None
    assert checkpoint_id_of({"configurable": {"checkpoint_id": "c-1"}}) == "c-1"
    with pytest.raises(InvalidConfigError, match="checkpoint_id"):
        checkpoint_id_of({"configurable": {"checkpoint_id": "a/b"}})
