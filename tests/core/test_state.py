"""Unit tests of ``core.state``: what a saver holds between calls."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.regions import CrossRegion
from tests.core.canned import T0, make_core


class NoCipher:
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "none", plaintext

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return ciphertext


def test_a_saver_state_needs_no_clients_and_keeps_its_settings() -> None:
    core = make_core(prefix="/app", compression_level=5)
    assert (core.bucket, core.table, core.layout.prefix) == ("b", "t", "app/")
    assert core.now_ms() == int(T0 * 1000)
    assert not core.is_replica


@pytest.mark.parametrize(
    "serde",
    [
        JsonPlusSerializer(pickle_fallback=True),
        EncryptedSerializer(NoCipher(), JsonPlusSerializer(pickle_fallback=True)),  # wrapped
    ],
)
def test_a_serializer_that_falls_back_to_pickle_is_refused(serde: Any) -> None:
    with pytest.raises(InvalidConfigError, match="pickle"):
        make_core(serde=serde)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="inline_threshold"):
        make_core(inline_threshold=-1)


def test_a_replica_is_a_saver_outside_the_home_region() -> None:
    cross = CrossRegion("us-east-1")
    assert make_core(region_name="eu-west-1", cross_region=cross).is_replica
    assert not make_core(region_name="us-east-1", cross_region=cross).is_replica


def test_versions_count_up_with_a_random_tail() -> None:
    core = make_core()
    first = core.get_next_version(None, None)
    assert first.startswith(f"{1:032}.")
    assert core.get_next_version(first, None).startswith(f"{2:032}.")
    # A thread migrated from a saver with integer versions keeps counting in integers.
    assert core.get_next_version(7, None) == 8  # type: ignore[arg-type]
    assert core.get_next_version(first, None) != core.get_next_version(first, None)


def test_versions_have_one_width_so_stored_sizes_do_not_vary() -> None:
    core = make_core()
    versions = [core.get_next_version(None, None) for _ in range(2000)]
    assert {len(v) for v in versions} == {49}
    assert all(re.fullmatch(r"0{31}1\.[0-9a-f]{16}", v) for v in versions)
    # a version written by an earlier release (random.random() text) keeps counting
    assert core.get_next_version(f"{41:032}.0.6131219049925384", None).startswith(f"{42:032}.")


def test_forgetting_a_thread_drops_its_cache_entries_only() -> None:
    core = make_core()
    caches = core.caches
    for thread in ("t1", "t2"):
        caches.objects.put(f"{thread}/b/x", b"x", 1)
        caches.known_blobs.put(f"{thread}/b/x", True)
        caches.entries.put((thread, "", "ch", "1"), ["i", "json", b"1"], 1)
        caches.latest.put((thread, "", "ch"), ["r", "json", [], [], b"", 0], 1)
    caches.forget_thread("t1", "t1/")
    assert caches.objects.get("t1/b/x") is None and "t1/b/x" not in caches.known_blobs
    assert caches.entries.get(("t1", "", "ch", "1")) is None
    assert caches.latest.get(("t1", "", "ch")) is None
    assert caches.objects.get("t2/b/x") == b"x" and "t2/b/x" in caches.known_blobs
    assert caches.entries.get(("t2", "", "ch", "1")) is not None
    assert caches.latest.get(("t2", "", "ch")) is not None
