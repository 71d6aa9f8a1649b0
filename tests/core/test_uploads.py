"""Unit tests of ``core.uploads``: one upload per chunk at a time."""

from __future__ import annotations

from langgraph_s3.core.entries import Listed, Span
from langgraph_s3.core.uploads import Placement, SharedUploads

SPAN = Span(b"\x01" * 32, 0, 1)


Made = dict[bytes, tuple[str, Listed]]


def loose(
    fresh: dict[str, bytes], where: dict[str, Span | None], lists: list[bytes]
) -> tuple[Placement, Made]:
    return {key: (frame, {key: None}) for key, frame in fresh.items()}, {}


def packed(
    fresh: dict[str, bytes], where: dict[str, Span | None], lists: list[bytes]
) -> tuple[Placement, Made]:
    return {"pack": (b"".join(fresh.values()), dict.fromkeys(fresh, SPAN))}, {}


def nothing_known(key: str) -> None:
    return None


def test_the_first_flow_owns_a_chunk_and_later_ones_wait_for_it_where_it_is() -> None:
    uploads = SharedUploads()
    first = uploads.share(
        {"a": b"A", "b": b"B", "known": b"K"},
        lambda k: SPAN if k == "known" else None,
        packed,
    )
    assert first.bodies == {"pack": b"AB"} and first.members == {"pack": ["a", "b"]}
    assert first.where == {"known": SPAN, "a": SPAN, "b": SPAN} and first.waits == {}
    second = uploads.share({"b": b"B", "c": b"C"}, nothing_known, loose)
    assert second.bodies == {"c": b"C"}
    assert second.waits == {"b": first.done["pack"]} and second.where["b"] == SPAN


def test_release_reports_each_outcome_and_frees_the_chunks() -> None:
    uploads = SharedUploads()
    shares = uploads.share({"ok": b"1", "bad": b"2", "abandoned": b"3"}, nothing_known, loose)
    shares.done["ok"].set_result(True)
    shares.done["bad"].set_result(False)
    done: list[str] = []
    failed: list[str] = []
    uploads.release(shares, done.append, failed.append)
    assert done == ["ok"] and failed == ["bad", "abandoned"]
    # An upload never resolved counts as failed and wakes whoever waits on it.
    assert shares.done["abandoned"].result() is False
    again = uploads.share({"ok": b"1", "bad": b"2"}, nothing_known, loose)
    assert sorted(again.bodies) == ["bad", "ok"] and again.waits == {}


def test_release_leaves_a_newer_upload_of_the_same_chunk_alone() -> None:
    uploads = SharedUploads()
    first = uploads.share({"k": b"K"}, nothing_known, loose)
    uploads.release(first, lambda k: None, lambda k: None)
    second = uploads.share({"k": b"K"}, nothing_known, loose)
    uploads.release(first, lambda k: None, lambda k: None)  # a late second release
    third = uploads.share({"k": b"K"}, nothing_known, loose)
    assert third.waits == {"k": second.done["k"]}


def test_an_upload_that_already_failed_is_placed_again_not_waited_for() -> None:
    uploads = SharedUploads()
    first = uploads.share({"k": b"K"}, nothing_known, loose)
    first.done["k"].set_result(False)  # its PUT failed; its flow has not released yet
    second = uploads.share({"k": b"K"}, nothing_known, loose)
    assert second.waits == {} and second.bodies == {"k": b"K"}
