"""The collector's scratch store: threads come back whole, whatever order the scan
gave their items in, and nothing stays on disk."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3.core.scratch import Scratch


def item(pk: str, sk: str, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, **extra}


def test_each_thread_comes_back_whole_however_its_items_were_scattered(tmp_path: Path) -> None:
    items = [
        item(f"t{n}", f"c#{k:03d}", b={"B": bytes([n, k])}) for n in range(50) for k in range(7)
    ]
    shuffled = items[:]
    random.Random(4).shuffle(shuffled)
    with Scratch(tmp_path) as store:
        for start in range(0, len(shuffled), 13):  # pages that split every thread
            store.add_items(shuffled[start : start + 13])
        threads = list(store.threads())
        assert store.thread_count() == 50
    assert [t[0]["pk"]["S"] for t in threads] == sorted(f"t{n}" for n in range(50))
    for thread in threads:
        n = int(thread[0]["pk"]["S"][1:])
        assert thread == [item(f"t{n}", f"c#{k:03d}", b={"B": bytes([n, k])}) for k in range(7)]


def test_an_item_read_twice_is_kept_once_with_its_latest_content(tmp_path: Path) -> None:
    with Scratch(tmp_path) as store:
        store.add_items([item("t", "h#~", at={"N": "1"})])
        store.add_items([item("t", "h#~", at={"N": "2"})])
        assert list(store.threads()) == [[item("t", "h#~", at={"N": "2"})]]


def test_references_can_be_recorded_while_threads_are_read(tmp_path: Path) -> None:
    # The collector records a thread's references before reading the next thread.
    keys = [f"t/b/{n:064x}" for n in range(1200)]
    with Scratch(tmp_path) as store:
        store.add_items([item(f"t{n:04d}", "h#~") for n in range(1200)])
        for n, _ in enumerate(store.threads()):
            store.reference([keys[n], keys[n]])
        assert store.referenced([*keys, "t/b/missing"]) == set(keys)
        assert store.referenced([]) == set()


def test_the_scratch_directory_is_removed_on_exit_and_on_error(tmp_path: Path) -> None:
    with Scratch(tmp_path) as store:
        store.add_items([item("t", "h#~")])
        assert store.path.exists() and store.path.parent.parent == tmp_path
        assert store.size() == store.path.stat().st_size > 0
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), Scratch(tmp_path) as store:
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_batch_adds_nothing(tmp_path: Path) -> None:
    with Scratch(tmp_path) as store:
        store.add_items([item("t", "a")])
        with pytest.raises(KeyError):
            store.add_items([item("t", "b"), {"pk": {"S": "t"}}])  # no sort key
        assert list(store.threads()) == [[item("t", "a")]]


def test_folder_sizes_add_up_per_folder(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        scratch.add_objects([("a/", 10), ("b/", 5)])
        scratch.add_objects([("a/", 7)])
        assert scratch.folder("a/") == (2, 17)
        assert scratch.folder("b/") == (1, 5)
        assert scratch.folder("c/") == (0, 0)
