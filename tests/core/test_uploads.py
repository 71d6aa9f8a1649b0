"""Unit tests of ``core.uploads``: one upload per blob at a time."""

from __future__ import annotations

from langgraph_s3.core.uploads import SharedUploads


def test_the_first_claim_owns_a_key_and_later_ones_share_its_future() -> None:
    uploads = SharedUploads()
    mine, theirs = uploads.claim(["a", "b", "known"], skip=lambda k: k == "known")
    assert sorted(mine) == ["a", "b"] and theirs == {}
    again, waiting = uploads.claim(["b", "c"], skip=lambda k: False)
    assert list(again) == ["c"] and waiting == {"b": mine["b"]}


def test_release_reports_each_outcome_and_frees_the_keys() -> None:
    uploads = SharedUploads()
    mine, _ = uploads.claim(["ok", "bad", "abandoned"], skip=lambda k: False)
    mine["ok"].set_result(True)
    mine["bad"].set_result(False)
    done: list[str] = []
    failed: list[str] = []
    uploads.release(mine, done.append, failed.append)
    assert done == ["ok"] and failed == ["bad", "abandoned"]
    # An upload never resolved counts as failed and wakes whoever waits on it.
    assert mine["abandoned"].result() is False
    fresh, theirs = uploads.claim(["ok", "bad", "abandoned"], skip=lambda k: False)
    assert sorted(fresh) == ["abandoned", "bad", "ok"] and theirs == {}


def test_release_leaves_a_newer_claim_of_the_same_key_alone() -> None:
    uploads = SharedUploads()
    first, _ = uploads.claim(["k"], skip=lambda k: False)
    uploads.release(first, lambda k: None, lambda k: None)
    second, _ = uploads.claim(["k"], skip=lambda k: False)
    uploads.release(first, lambda k: None, lambda k: None)  # a late second release
    _, theirs = uploads.claim(["k"], skip=lambda k: False)
    assert theirs == {"k": second["k"]}
