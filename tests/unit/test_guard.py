"""The run-bound guard's thread-id mark (``langgraph_s3.guard``) as users see it."""

from __future__ import annotations

import copy
import json
import operator
import pickle

from langgraph_s3.guard import HeadRead


class AnyStr(str):
    """A matcher like the one LangGraph's tests compare debug events with."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    __hash__ = str.__hash__


def test_head_read_compares_like_the_plain_thread_id() -> None:
    mark = HeadRead("t-1", "", "cid")
    # operator.eq/ne with either operand first, as Python dispatches both ways.
    assert operator.eq(mark, "t-1") and operator.eq("t-1", mark)
    assert operator.ne(mark, "t-2") and not operator.ne(mark, "t-1")
    assert hash(mark) == hash("t-1") and {mark: 1}["t-1"] == 1
    # Python asks the matcher first for a plain str; a HeadRead must do the same.
    assert operator.eq(mark, AnyStr()) and operator.eq(AnyStr(), mark)
    assert not operator.ne(mark, AnyStr())
    assert [{"thread_id": mark}] == [{"thread_id": AnyStr()}]


def test_head_read_survives_copy_pickle_and_json() -> None:
    mark = HeadRead("t-1", "ns", "cid")
    for clone in (copy.deepcopy(mark), pickle.loads(pickle.dumps(mark))):
        assert isinstance(clone, HeadRead) and (clone.ns, clone.head) == ("ns", "cid")
        assert clone == "t-1"
    assert json.loads(json.dumps({"thread_id": mark})) == {"thread_id": "t-1"}
