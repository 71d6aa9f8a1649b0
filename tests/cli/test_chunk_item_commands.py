"""The inspecting commands on chunk items (layout 5), through the console script on a
moto server: ``stats`` and ``threads`` count them and their bytes, ``gc --json``
reports them, and ``verify`` reports a missing one as damage, as a missing blob."""

from __future__ import annotations

import json

from tests.cli.test_commands import run, url
from tests.conftest import Backend
from tests.storage.test_chunk_item_gc import chunk_items, put_steps


def test_stats_threads_gc_and_verify_see_chunk_items(server_backend: Backend) -> None:
    configs = put_steps(server_backend.saver(), 2)
    items = chunk_items(server_backend)
    assert len(items) == 2 and not [k for k in server_backend.object_keys() if "/b/" in k]
    frames = sum(map(len, items.values()))
    where = url(server_backend)

    figures = json.loads(run("--url", where, "stats", "--json").stdout)
    assert (figures["chunk_items"], figures["chunk_item_bytes"]) == (2, frames)
    assert figures["index_bytes"] > frames and figures["objects"] == 0
    one = json.loads(run("--url", where, "stats", "t1", "--json").stdout)
    assert one["blobs"] == 2 and one["bytes_stored"] > frames
    assert one["bytes_uncompressed"] > 2 * 10_000  # two 10 KB documents
    (summary,) = json.loads(run("--url", where, "threads", "--json").stdout)
    assert (summary["chunk_items"], summary["chunk_item_bytes"]) == (2, frames)

    collected = run("--url", where, "gc", "--json")
    assert collected.returncode == 0, collected.stderr
    report = json.loads(collected.stdout)
    assert (report["chunk_items"], report["chunk_items_referenced"]) == (2, 2)
    assert run("--url", where, "verify", "t1").returncode == 0

    # Their chunk items disappear: damage in both checkpoints, as a missing blob is.
    for sk in items:
        server_backend.dynamodb().delete_item(
            TableName=server_backend.table, Key={"pk": {"S": "t1"}, "sk": {"S": sk}}
        )
    damaged = run("--url", where, "verify", "t1", "--json")
    assert damaged.returncode == 1, damaged.stderr
    found = json.loads(damaged.stdout)["damaged"]
    assert {d["checkpoint_id"] for d in found} == {
        c["configurable"]["checkpoint_id"] for c in configs
    }
    assert all("chunk item 't1|b#" in d["error"] and "missing" in d["error"] for d in found)
