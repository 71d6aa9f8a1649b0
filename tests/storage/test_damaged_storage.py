"""Damaged storage: a read of a damaged thread is a typed error naming what is damaged.

Objects altered, truncated, missing or swapped, index items and pending-write records
damaged, stored pickle: nothing here returns ``None`` or a partial state, and nothing
damaged is ever executed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3 import (
    CorruptObjectError,
    MissingObjectError,
    ObjectError,
    UnsupportedFormatError,
    codec,
)
from langgraph_s3.core import schema
from langgraph_s3.keys import Layout
from tests.conftest import Backend
from tests.storage.test_bad_input import build_echo, cfg, expect_error, make_checkpoint, put

LAYOUT = Layout("")


# --------------------------------------------------------------------------- damage
class Seeded:
    """A thread with a checkpoint (inline values and a blob value) and a large pending write.

    With ``pad`` the checkpoint body is large enough (30 incompressible inline values of
    400 bytes, each too small to be worth a blob of its own) to be stored as an S3 object;
    without it the body is small, and the saver keeps it inside the DynamoDB index item
    instead. The helpers damage the body wherever it is.
    """

    def __init__(self, backend: Backend, thread: str = "damaged", pad: bool = True) -> None:
        self.backend = backend
        self.thread = thread
        self.big = os.urandom(40_000)
        self.big_write = os.urandom(50_000)
        self.values: dict[str, Any] = {"small": "s", "big": self.big}
        if pad:
            self.values.update({f"pad{i}": os.urandom(400) for i in range(30)})
        saver = backend.saver()
        self.config = put(saver, self.thread, self.values)
        saver.put_writes(self.config, [("w", self.big_write)], "task-1")
        self.cid = self.config["configurable"]["checkpoint_id"]
        self._s3 = backend.s3()
        self._ddb = backend.dynamodb()
        self.item_key = {
            "pk": {"S": LAYOUT.pk(thread)},
            "sk": {"S": LAYOUT.checkpoint_sk("", self.cid)},
        }
        item = self.item()
        self.checkpoint_key = LAYOUT.checkpoint_key(thread, "", self.cid, item["h"]["S"])
        self.in_item = "b" in item
        mine = [k for k in backend.object_keys() if k.startswith(LAYOUT.thread_prefix(thread))]
        objects = [k for k in mine if "/c/" in k]
        assert objects == ([] if self.in_item else [self.checkpoint_key])
        if pad:
            assert not self.in_item, "a 12 KB checkpoint body is expected in S3"
        self.blob_keys = sorted(k for k in mine if "/b/" in k)
        assert len(self.blob_keys) == 2
        self.blob_of_value = next(
            k for k in self.blob_keys if self.unframe(self.read(k), k, codec.KIND_BLOB) == self.big
        )
        self.blob_of_write = next(k for k in self.blob_keys if k != self.blob_of_value)

    def item(self) -> dict[str, Any]:
        return self._ddb.get_item(  # type: ignore[no-any-return]
            TableName=self.backend.table, Key=self.item_key, ConsistentRead=True
        )["Item"]

    def read(self, key: str) -> bytes:
        return self._s3.get_object(Bucket=self.backend.bucket, Key=key)["Body"].read()  # type: ignore[no-any-return]

    def write(self, key: str, body: bytes) -> None:
        self._s3.put_object(Bucket=self.backend.bucket, Key=key, Body=body)

    @staticmethod
    def unframe(body: bytes, key: str, kind: bytes) -> bytes:
        return codec.unframe(body, key=key, kind=kind)

    def body(self) -> bytes:
        """The checkpoint body, from the index item or from S3."""
        if self.in_item:
            body: bytes = self.item()["b"]["B"]
            return body
        return self.read(self.checkpoint_key)

    def overwrite_body(self, body: bytes) -> None:
        """Change the stored body in place (the index digest no longer matches)."""
        if self.in_item:
            self._set_item(b=body)
        else:
            self.write(self.checkpoint_key, body)

    def replace_checkpoint_object(self, body: bytes) -> str:
        """Store ``body`` as this checkpoint's body the way a writer would (new digest, new
        key, index updated), and return the key errors must name."""
        digest = hashlib.sha256(body).hexdigest()
        if self.in_item:  # trimmed (layout 6): h binds the body to this item
            digest = schema.place_digest((self.thread, "", self.cid), body)
        key = LAYOUT.checkpoint_key(self.thread, "", self.cid, digest)
        if self.in_item:
            self._set_item(b=body, h=digest)
        else:
            self.write(key, body)
            self._set_item(h=digest)
        return key

    def _set_item(self, **attrs: bytes | str) -> None:
        values = {f":{k}": {"B": v} if isinstance(v, bytes) else {"S": v} for k, v in attrs.items()}
        self._ddb.update_item(
            TableName=self.backend.table,
            Key=self.item_key,
            UpdateExpression="SET " + ", ".join(f"{k} = :{k}" for k in attrs),
            ExpressionAttributeValues=values,
        )

    def envelope(self) -> dict[str, Any]:
        body = self.body()
        payload = self.unframe(body, self.checkpoint_key, codec.KIND_CHECKPOINT)
        return codec.unpack(payload, key=self.checkpoint_key)  # type: ignore[no-any-return]

    def assert_refused(self, exc_type: type[ObjectError], key: str, *words: str) -> None:
        """Every way of reading the thread raises ``exc_type`` naming ``key``."""
        graph = build_echo(self.backend.saver())
        reads: list[Callable[[], Any]] = [
            lambda: self.backend.saver().get_tuple(cfg(self.thread)),
            lambda: self.backend.saver().get_tuple(self.config),
            lambda: list(self.backend.saver().list(cfg(self.thread))),
            lambda: graph.get_state(cfg(self.thread)),
        ]
        for read in reads:
            err = expect_error(exc_type, read, key, *words)
            assert err.key == key


def test_sound_thread_reads_back(backend: Backend) -> None:
    """Control for the damage tests: the seeded thread reads back completely."""
    seeded = Seeded(backend)
    tup = backend.saver().get_tuple(cfg(seeded.thread))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == seeded.values
    assert tup.pending_writes == [("task-1", "w", seeded.big_write)]


@pytest.fixture(params=["s3-body", "small-body"])
def seeded(backend: Backend, request: pytest.FixtureRequest) -> Seeded:
    """A seeded thread whose checkpoint body is in S3, or small (wherever the saver puts it)."""
    return Seeded(backend, pad=request.param == "s3-body")


def flip_middle(body: bytes) -> bytes:
    broken = bytearray(body)
    broken[len(broken) // 2] ^= 0xFF
    return bytes(broken)


def newer_version(body: bytes) -> bytes:
    """The same frame with format version 99 in its header."""
    return codec.MAGIC + bytes([99]) + body[len(codec.MAGIC) + 1 :]


def test_corrupted_checkpoint_body(seeded: Seeded) -> None:
    """A checkpoint body with one byte changed is refused as corrupt, naming its key."""
    seeded.overwrite_body(flip_middle(seeded.body()))
    seeded.assert_refused(CorruptObjectError, seeded.checkpoint_key)


def test_truncated_checkpoint_body(seeded: Seeded) -> None:
    """A truncated checkpoint body (also one shorter than the header) is refused."""
    body = seeded.body()
    seeded.overwrite_body(body[: len(body) // 2])
    seeded.assert_refused(CorruptObjectError, seeded.checkpoint_key)
    seeded.overwrite_body(body[:3])
    seeded.assert_refused(CorruptObjectError, seeded.checkpoint_key)


def test_truncated_body_with_matching_digest(seeded: Seeded) -> None:
    """Even when the index digest matches (a writer stored a truncated frame), the broken
    zstd frame is reported as corrupt, not as a partial state."""
    body = seeded.body()
    key = seeded.replace_checkpoint_object(body[: len(body) - 5])
    seeded.assert_refused(CorruptObjectError, key, "truncated")


def test_missing_checkpoint_object(backend: Backend) -> None:
    """An index item whose S3 object is gone raises MissingObjectError naming the object."""
    seeded = Seeded(backend)
    backend.s3().delete_object(Bucket=backend.bucket, Key=seeded.checkpoint_key)
    seeded.assert_refused(MissingObjectError, seeded.checkpoint_key, backend.bucket)


@pytest.mark.parametrize("which", ["value", "write"])
def test_missing_blob(backend: Backend, which: str) -> None:
    """A missing blob of a channel value or of a pending write raises MissingObjectError
    naming the blob."""
    seeded = Seeded(backend, pad=False)
    key = seeded.blob_of_value if which == "value" else seeded.blob_of_write
    backend.s3().delete_object(Bucket=backend.bucket, Key=key)
    seeded.assert_refused(MissingObjectError, key)


@pytest.mark.parametrize("damage", ["flip", "truncate", "swap"])
def test_corrupted_blob(backend: Backend, damage: str) -> None:
    """A blob that is altered, truncated, or holds another blob's (valid) content is
    refused: every blob is checked against its content address."""
    seeded = Seeded(backend, pad=False)
    key = seeded.blob_of_value
    body = seeded.read(key)
    if damage == "flip":
        body = flip_middle(body)
    elif damage == "truncate":
        body = body[: len(body) // 2]
    else:
        body = seeded.read(seeded.blob_of_write)
    seeded.write(key, body)
    seeded.assert_refused(CorruptObjectError, key)


def test_unknown_format_version_of_checkpoint(seeded: Seeded) -> None:
    """A checkpoint body written by a newer format version (header byte 99, stored as a
    newer writer would, index digest matching) is refused with UnsupportedFormatError
    naming the key and saying to upgrade."""
    key = seeded.replace_checkpoint_object(newer_version(seeded.body()))
    seeded.assert_refused(UnsupportedFormatError, key, "99", "upgrade")


@pytest.mark.parametrize("which", ["value", "write"])
def test_unknown_format_version_of_blob(backend: Backend, which: str) -> None:
    """A blob with format version 99 is refused with UnsupportedFormatError naming it."""
    seeded = Seeded(backend, pad=False)
    key = seeded.blob_of_value if which == "value" else seeded.blob_of_write
    seeded.write(key, newer_version(seeded.read(key)))
    seeded.assert_refused(UnsupportedFormatError, key, "99", "upgrade")


def test_overwritten_in_place_with_newer_header_is_an_object_error(seeded: Seeded) -> None:
    """A checkpoint body overwritten in place with a version-99 header no longer matches
    the index digest; whichever class is chosen, it is a typed ObjectError naming the key."""
    seeded.overwrite_body(newer_version(seeded.body()))
    seeded.assert_refused(ObjectError, seeded.checkpoint_key)


def test_body_of_another_checkpoint(seeded: Seeded) -> None:
    """A valid body of another thread's checkpoint served under this checkpoint's index
    item is refused: one thread cannot be fed another's. A body in S3 holds its ids,
    checked on read; a body in its item (trimmed, layout 6) is bound to the item by
    ``h``, so one moved in with the ``h`` of the item it came from does not match."""
    other = Seeded(seeded.backend, "elsewhere", pad=not seeded.in_item)
    if not seeded.in_item:
        key = seeded.replace_checkpoint_object(other.body())
        seeded.assert_refused(CorruptObjectError, key, "another checkpoint")
        return
    moved = other.item()
    seeded._set_item(b=moved["b"]["B"], h=moved["h"]["S"])
    key = LAYOUT.checkpoint_key(seeded.thread, "", seeded.cid, moved["h"]["S"])
    seeded.assert_refused(CorruptObjectError, key, "moved from another checkpoint")


def test_corrupted_pending_write_record(backend: Backend) -> None:
    """A pending-write record with an unknown encoding is refused as corrupt, naming the item."""
    seeded = Seeded(backend)
    ddb = backend.dynamodb()
    sk = LAYOUT.writes_sk("", seeded.cid, "task-1")
    ddb.update_item(
        TableName=backend.table,
        Key={"pk": {"S": LAYOUT.pk(seeded.thread)}, "sk": {"S": sk}},
        UpdateExpression="SET w0 = :w",
        ExpressionAttributeValues={":w": {"B": b"\x09garbage"}},
    )
    with pytest.raises(CorruptObjectError) as info:
        backend.saver().get_tuple(cfg(seeded.thread))
    assert sk in info.value.key and sk in str(info.value)


def test_damaged_head_item_is_a_corrupt_object_error(backend: Backend) -> None:
    """A head item whose ``cid`` is not a string refuses a guarded continuation with
    CorruptObjectError naming the item (found by tests/faults: it was a KeyError)."""
    put(backend.saver(), "head", {"a": 1})
    run = backend.saver().get_tuple(cfg("head"))  # a read of the latest: guarded puts
    assert run is not None
    head_key = {"pk": {"S": LAYOUT.pk("head")}, "sk": {"S": LAYOUT.head_sk("")}}
    backend.dynamodb().update_item(
        TableName=backend.table,
        Key=head_key,
        UpdateExpression="SET cid = :n",
        ExpressionAttributeValues={":n": {"N": "7"}},
    )
    with pytest.raises(CorruptObjectError) as info:
        backend.saver().put(run.config, make_checkpoint({"a": 2}), {"step": 1}, {"a": "2"})
    assert info.value.key == f"{LAYOUT.pk('head')}|h#~|cid"
    assert "h#~" in str(info.value)
    assert len(list(backend.saver().list(cfg("head")))) == 1


@pytest.mark.parametrize("value", ["approve", "x" * 3000], ids=["raw", "compressed"])
def test_flipped_byte_in_a_pending_write_value(backend: Backend, value: str) -> None:
    """One byte flipped anywhere in a stored write record (tag, checksum or value) is
    refused as corrupt, naming the item and attribute; it used to be returned altered."""
    saver = backend.saver()
    first = put(saver, "flip", {})
    saver.put_writes(first, [("decision", value)], "task-1")
    ddb = backend.dynamodb()
    key = {
        "pk": {"S": LAYOUT.pk("flip")},
        "sk": {"S": LAYOUT.writes_sk("", first["configurable"]["checkpoint_id"], "task-1")},
    }
    record = ddb.get_item(TableName=backend.table, Key=key)["Item"]["w0"]["B"]
    for at in sorted({0, 1, 5, len(record) // 2, len(record) - 1}):
        damaged = bytearray(record)
        damaged[at] ^= 0x01
        ddb.update_item(
            TableName=backend.table, Key=key, UpdateExpression="SET w0 = :w",
            ExpressionAttributeValues={":w": {"B": bytes(damaged)}},
        )  # fmt: skip
        with pytest.raises(CorruptObjectError) as info:
            backend.saver().get_tuple(first)
        assert key["sk"]["S"] in info.value.key and "w0" in str(info.value), at
    ddb.update_item(
        TableName=backend.table, Key=key, UpdateExpression="SET w0 = :w",
        ExpressionAttributeValues={":w": {"B": record}},
    )  # fmt: skip
    got = backend.saver().get_tuple(first)
    assert got is not None and [w[1:] for w in got.pending_writes] == [("decision", value)]


def test_pending_write_records_of_the_previous_release_still_read(backend: Backend) -> None:
    """Records written before they carried a checksum (tags 1 and 2) are still read."""
    saver = backend.saver(group_writes=False)  # single records, as that release wrote
    first = put(saver, "legacy", {})
    saver.put_writes(first, [("a", "short"), ("b", "y" * 3000)], "task-1")
    ddb = backend.dynamodb()
    key = {
        "pk": {"S": LAYOUT.pk("legacy")},
        "sk": {"S": LAYOUT.writes_sk("", first["configurable"]["checkpoint_id"], "task-1")},
    }
    item = ddb.get_item(TableName=backend.table, Key=key)["Item"]
    for name in ("w0", "w1"):
        record = item[name]["B"]
        legacy = bytes([record[0] - 2]) + record[9:]  # tag 3/4 -> 1/2, checksum dropped
        ddb.update_item(
            TableName=backend.table, Key=key, UpdateExpression=f"SET {name} = :w",
            ExpressionAttributeValues={":w": {"B": legacy}},
        )  # fmt: skip
    got = backend.saver().get_tuple(first)
    assert got is not None
    assert [w[1:] for w in got.pending_writes] == [("a", "short"), ("b", "y" * 3000)]


class Trap:
    """Unpickling this creates ``path`` — proof that pickle was executed."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.makedirs, (self.path,))


def test_stored_pickle_is_refused_on_load(seeded: Seeded, tmp_path: Path) -> None:
    """A stored value tagged 'pickle' is refused with CorruptObjectError naming the object,
    and the pickle is never executed."""
    marker = tmp_path / "unpickled"
    env = seeded.envelope()
    env["ch"]["small"] = ["i", "pickle", pickle.dumps(Trap(str(marker)))]
    body = codec.frame(codec.KIND_CHECKPOINT, codec.pack(env), 3)
    key = seeded.replace_checkpoint_object(body)
    seeded.assert_refused(CorruptObjectError, key, "pickle")
    assert not marker.exists()
