"""Bad input and damaged storage: every failure is a typed error that says what is wrong.

Nothing here returns ``None`` or a partial state for a damaged thread, and nothing is
stored for an input that is refused.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import boto3
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

from langgraph_s3 import (
    AsyncS3Saver,
    CorruptObjectError,
    InvalidConfigError,
    MissingObjectError,
    ObjectError,
    S3Saver,
    S3SaverError,
    SerializationError,
    StorageNotFoundError,
    UnsupportedFormatError,
    codec,
)
from langgraph_s3.keys import Layout
from tests.conftest import REGION, Backend, RequestLog

LAYOUT = Layout("")


def cfg(thread_id: Any, ns: str = "", **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, **extra}}


def make_checkpoint(values: dict[str, Any], version: str = "1") -> Checkpoint:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {name: version for name in values}
    return cp


def put(
    saver: Any, thread: Any, values: dict[str, Any], ns: str = "", md: dict[str, Any] | None = None
) -> RunnableConfig:
    """Put a checkpoint with ``values`` (all channels new) and return its config."""
    cp = make_checkpoint(values)
    return saver.put(  # type: ignore[no-any-return]
        cfg(thread, ns), cp, md or {"source": "loop", "step": 0}, dict(cp["channel_versions"])
    )


def offline_saver(log: RequestLog, **kw: Any) -> S3Saver:
    """A saver whose clients point at a closed local port and whose requests are logged:
    input validation must refuse bad input before sending anything."""
    from botocore.config import Config

    config = Config(connect_timeout=1, read_timeout=1, retries={"max_attempts": 1})
    endpoint = "http://127.0.0.1:9"
    return S3Saver(
        bucket="offline-bucket",
        table="offline-table",
        s3_client=log.attach(
            boto3.client("s3", region_name=REGION, endpoint_url=endpoint, config=config)
        ),
        dynamodb_client=log.attach(
            boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint, config=config)
        ),
        **kw,
    )


def expect_error(exc_type: type[BaseException], call: Callable[[], Any], *words: str) -> Any:
    """Assert ``call`` raises ``exc_type`` and its message contains every word."""
    with pytest.raises(exc_type) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    return info.value


# --------------------------------------------------------------------------- configs
@pytest.mark.parametrize(
    "config",
    [
        {"configurable": {}},
        {"configurable": {"checkpoint_ns": ""}},
        {"configurable": {"thread_id": None}},
    ],
    ids=["empty", "ns-only", "none"],
)
def test_missing_thread_id_names_thread_id(request_log: RequestLog, config: Any) -> None:
    """get_tuple, list, put and put_writes without a thread_id raise InvalidConfigError (a
    ValueError) whose message names thread_id, before any request is sent."""
    saver = offline_saver(request_log)
    cp = make_checkpoint({"x": 1})
    calls: list[Callable[[], Any]] = [
        lambda: saver.get_tuple(config),
        lambda: list(saver.list(config)),
        lambda: saver.put(config, cp, {}, {"x": "1"}),
        lambda: saver.put_writes(config, [("x", 1)], "task"),
    ]
    for call in calls:
        err = expect_error(InvalidConfigError, call, "thread_id")
        assert isinstance(err, ValueError)
    assert request_log.calls == []


@pytest.mark.parametrize(
    "config",
    [{}, {"thread_id": "t"}, {"configurable": "t"}, None, "thread"],
    ids=["empty", "flat", "str-configurable", "none", "str"],
)
def test_config_without_configurable(request_log: RequestLog, config: Any) -> None:
    """A config without a 'configurable' dict is refused with a message showing the shape."""
    saver = offline_saver(request_log)
    expect_error(InvalidConfigError, lambda: saver.get_tuple(config), "configurable", "thread_id")
    expect_error(
        InvalidConfigError,
        lambda: saver.put(config, make_checkpoint({"x": 1}), {}, {"x": "1"}),
        "configurable",
    )
    assert request_log.calls == []


@pytest.mark.parametrize("thread_id", [1.5, {"id": 1}, ["t"], b"t", True])
def test_thread_id_of_wrong_type(request_log: RequestLog, thread_id: Any) -> None:
    """thread_id must be a str (or int/UUID); other types are refused, not str()-ed."""
    saver = offline_saver(request_log)
    expect_error(InvalidConfigError, lambda: saver.get_tuple(cfg(thread_id)), "thread_id")
    expect_error(InvalidConfigError, lambda: put(saver, thread_id, {"x": 1}), "thread_id")
    assert request_log.calls == []


def test_int_and_uuid_thread_ids_are_their_str(inproc_backend: Backend) -> None:
    """int and UUID thread ids are accepted and address the same thread as their str()."""
    saver = inproc_backend.saver()
    tid = uuid.uuid4()
    put(saver, tid, {"x": "uuid"})
    put(saver, 42, {"x": "int"})
    fresh = inproc_backend.saver()
    by_uuid, by_int = fresh.get_tuple(cfg(str(tid))), fresh.get_tuple(cfg("42"))
    assert by_uuid is not None and by_int is not None
    assert by_uuid.checkpoint["channel_values"] == {"x": "uuid"}
    assert by_int.checkpoint["channel_values"] == {"x": "int"}


def test_put_writes_without_checkpoint_id(request_log: RequestLog) -> None:
    """put_writes must know which checkpoint the writes belong to."""
    saver = offline_saver(request_log)
    expect_error(
        InvalidConfigError,
        lambda: saver.put_writes(cfg("t"), [("x", 1)], "task-1"),
        "checkpoint_id",
    )
    assert request_log.calls == []


@pytest.mark.parametrize(
    "checkpoint_id",
    ["a/b", "", "x" * 129, "ünï", "a b", "a#b", "../x", "id\x00", 123],
    ids=["slash", "empty", "long", "unicode", "space", "hash", "dotdot", "nul", "int"],
)
def test_unsupported_checkpoint_id(request_log: RequestLog, checkpoint_id: Any) -> None:
    """Checkpoint ids outside 1-128 of [A-Za-z0-9_:-] are refused in configs and in put,
    naming checkpoint_id, before any request is sent."""
    saver = offline_saver(request_log)
    expect_error(
        InvalidConfigError,
        lambda: saver.get_tuple(cfg("t", checkpoint_id=checkpoint_id)),
        "checkpoint_id",
    )
    expect_error(
        InvalidConfigError,
        lambda: saver.put_writes(cfg("t", checkpoint_id=checkpoint_id), [("x", 1)], "task"),
        "checkpoint_id",
    )
    cp = make_checkpoint({"x": 1})
    cp["id"] = checkpoint_id
    expect_error(
        InvalidConfigError, lambda: saver.put(cfg("t"), cp, {}, {"x": "1"}), "checkpoint_id"
    )
    assert request_log.calls == []


# --------------------------------------------------------------------------- storage
def saver_without_bucket(backend: Backend) -> tuple[S3Saver, str]:
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    saver = S3Saver(
        bucket=missing,
        table=backend.table,
        s3_client=backend.s3(),
        dynamodb_client=backend.dynamodb(),
    )
    return saver, missing


def test_missing_bucket(backend: Backend) -> None:
    """A saver on a bucket that does not exist raises StorageNotFoundError naming the bucket
    and saying to run setup() or deploy the infrastructure, when it writes a value to S3
    (committing nothing) and when it reads a thread whose data is in S3."""
    put(backend.saver(), "t", {"big": os.urandom(30_000), "pad": os.urandom(15_000)})
    saver, missing = saver_without_bucket(backend)
    words = (missing, "setup()", "infra/storage.yaml")
    expect_error(
        StorageNotFoundError, lambda: put(saver, "other", {"v": os.urandom(30_000)}), *words
    )
    assert not [i for i in backend.items() if i["pk"]["S"] == LAYOUT.pk("other")]
    expect_error(StorageNotFoundError, lambda: saver.get_tuple(cfg("t")), *words)
    expect_error(StorageNotFoundError, lambda: list(saver.list(cfg("t"))), *words)


def test_missing_bucket_detected_on_first_write(backend: Backend) -> None:
    """Even a small checkpoint (whose body could live in the index item) must not be
    committed by a saver whose bucket does not exist: the misconfiguration is reported at
    the first write with StorageNotFoundError, not later when a value first needs S3."""
    saver, missing = saver_without_bucket(backend)
    expect_error(StorageNotFoundError, lambda: put(saver, "small", {"x": 1}), missing, "setup()")
    assert not [i for i in backend.items() if i["pk"]["S"] == LAYOUT.pk("small")]


def test_missing_bucket_detected_on_first_read(backend: Backend) -> None:
    """A saver's first latest-checkpoint read checks the bucket too, so a thread whose
    checkpoints all live in the index is not read through a misconfigured saver."""
    put(backend.saver(), "indexed", {"x": 1})
    saver, missing = saver_without_bucket(backend)
    expect_error(StorageNotFoundError, lambda: saver.get_tuple(cfg("indexed")), missing, "setup()")


def test_bucket_is_checked_once_alongside_the_first_read(
    backend: Backend, request_log: RequestLog
) -> None:
    """The bucket check rides along with the first get_tuple (the read every run starts
    with) instead of delaying the first put: one HeadBucket per saver, and none by the
    puts that follow."""
    put(backend.saver(), "t", {"x": 1})
    saver = backend.saver(
        s3_client=request_log.attach(backend.s3()),
        dynamodb_client=request_log.attach(backend.dynamodb()),
    )
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert sorted(request_log.calls) == [("dynamodb", "Query"), ("s3", "HeadBucket")]
    request_log.clear()
    for i in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"x": i}
        cp["channel_versions"] = {"x": str(i + 2)}
        tup_config = saver.put(tup.config, cp, {"source": "loop", "step": i}, {"x": str(i + 2)})
        tup = saver.get_tuple(tup_config)
        assert tup is not None
    assert ("s3", "HeadBucket") not in request_log.calls
    assert [c for c in request_log.calls if c[0] == "s3"] == []


def test_missing_table(backend: Backend) -> None:
    """A saver on a table that does not exist raises StorageNotFoundError naming the table
    and saying to run setup() or deploy the infrastructure; get_tuple never returns None."""
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    saver = S3Saver(
        bucket=backend.bucket,
        table=missing,
        s3_client=backend.s3(),
        dynamodb_client=backend.dynamodb(),
    )
    words = (missing, "setup()", "infra/storage.yaml")
    expect_error(StorageNotFoundError, lambda: saver.get_tuple(cfg("t")), *words)
    expect_error(StorageNotFoundError, lambda: list(saver.list(cfg("t"))), *words)
    expect_error(StorageNotFoundError, lambda: put(saver, "t", {"x": 1}), *words)
    expect_error(StorageNotFoundError, lambda: saver.delete_thread("t"), *words)


async def test_missing_table_async(server_backend: Backend) -> None:
    """AsyncS3Saver translates a missing table the same way."""
    from langgraph_s3 import AsyncS3Saver as Async

    async with Async(
        bucket=server_backend.bucket,
        table="missing-table-x",
        region_name=REGION,
        endpoint_url=server_backend.endpoint_url,
    ) as saver:
        with pytest.raises(StorageNotFoundError, match=r"missing-table-x.*setup\(\)"):
            await saver.aget_tuple(cfg("t"))


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


class EchoState(TypedDict, total=False):
    small: str
    big: bytes


def build_echo(checkpointer: Any) -> Any:
    builder = StateGraph(EchoState)
    builder.add_node("echo", lambda s: {})
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=checkpointer)


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
    item is refused (ids inside the body are checked): one thread cannot be fed another's."""
    other = Seeded(seeded.backend, "elsewhere", pad=not seeded.in_item)
    key = seeded.replace_checkpoint_object(other.body())
    seeded.assert_refused(CorruptObjectError, key, "another checkpoint")


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
    saver = backend.saver()
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


# --------------------------------------------------------------------------- serialization
def test_unserializable_channel_value(backend: Backend) -> None:
    """A channel value the serializer refuses raises SerializationError naming the channel,
    before anything is uploaded or indexed."""
    saver = backend.saver()
    for bad in (object(), lambda: 0):
        expect_error(
            SerializationError, lambda b=bad: put(saver, "t", {"ok": 1, "odd": b}), "'odd'"
        )
    assert backend.object_keys() == []
    assert backend.items() == []
    assert backend.saver().get_tuple(cfg("t")) is None


def test_unserializable_metadata(backend: Backend) -> None:
    """Metadata the serializer refuses raises SerializationError naming the metadata key."""
    saver = backend.saver()
    md = {"source": "loop", "step": 0, "fine": "yes", "handler": lambda: 0}
    expect_error(
        SerializationError, lambda: put(saver, "t", {"x": 1}, md=md), "metadata key 'handler'"
    )
    assert backend.items() == []


def test_unserializable_pending_write(backend: Backend) -> None:
    """A pending write the serializer refuses names the channel and the task; no item."""
    saver = backend.saver()
    config = put(saver, "t", {"x": 1})
    items_before = backend.items()
    expect_error(
        SerializationError,
        lambda: saver.put_writes(config, [("fine", 1), ("odd", object())], "task-9"),
        "'odd'",
        "task-9",
    )
    assert backend.items() == items_before


class AnyState(TypedDict, total=False):
    n: int
    thing: Any


def test_graph_node_returning_unserializable_value(backend: Backend) -> None:
    """A node that returns an unserializable value fails the run with SerializationError
    naming the channel; the thread keeps its last good checkpoint."""

    def good(state: AnyState) -> AnyState:
        return {"n": 1}

    def bad(state: AnyState) -> AnyState:
        return {"thing": object()}

    builder = StateGraph(AnyState)
    builder.add_node("good", good)
    builder.add_node("bad", bad)
    builder.add_edge(START, "good")
    builder.add_edge("good", "bad")
    builder.add_edge("bad", END)
    graph = builder.compile(checkpointer=backend.saver())
    with pytest.raises(SerializationError, match="'thing'"):
        graph.invoke({"n": 0}, cfg("g"), durability="sync")
    reader = builder.compile(checkpointer=backend.saver())
    state = reader.get_state(cfg("g"))
    assert state.values["n"] == 1
    assert "thing" not in state.values
    assert state.next == ("bad",)


class PickleSerde:
    """A serializer that stores everything as pickle (and has no pickle_fallback flag)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", pickle.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return pickle.loads(data[1])


class NullCipher:
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "null", plaintext

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return ciphertext


@pytest.mark.parametrize(
    "serde",
    [
        JsonPlusSerializer(pickle_fallback=True),
        EncryptedSerializer(NullCipher(), JsonPlusSerializer(pickle_fallback=True)),
    ],
    ids=["jsonplus", "encrypted-wrapper"],
)
def test_pickle_fallback_serde_refused_at_construction(serde: Any) -> None:
    """Both savers refuse a serde with pickle fallback (also when wrapped) at construction."""
    for cls in (S3Saver, AsyncS3Saver):
        err = expect_error(InvalidConfigError, lambda c=cls: c("b", "t", serde=serde), "pickle")
        assert isinstance(err, ValueError)


def test_serde_producing_pickle_is_refused_on_write(request_log: RequestLog) -> None:
    """A serde that emits pickle is refused when writing, naming the channel; nothing sent."""
    saver = offline_saver(request_log, serde=PickleSerde())
    expect_error(SerializationError, lambda: put(saver, "t", {"v": 1}), "channel 'v'", "pickle")
    assert request_log.calls == []


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


# --------------------------------------------------------------------------- sizes and ids
def test_50_mb_channel_round_trips(inproc_backend: Backend) -> None:
    """A 50 MB channel value is stored (chunked) and read back byte-identical by a new saver."""
    base = os.urandom(1 << 20)
    value = b"".join(i.to_bytes(4, "big") + base[i * 9973 :] + base[: i * 9973] for i in range(50))
    assert len(value) > 50 * (1 << 20)
    config = put(inproc_backend.saver(), "huge", {"doc": value, "n": 1})
    tup = inproc_backend.saver().get_tuple(config)
    assert tup is not None
    got = tup.checkpoint["channel_values"]["doc"]
    assert len(got) == len(value)
    assert hashlib.sha256(got).digest() == hashlib.sha256(value).digest()
    blobs = [k for k in inproc_backend.object_keys() if "/b/" in k]
    assert len(blobs) > 10  # chunked, not one 50 MB object


LONG_ID = "L" * 1024
ODD_THREADS = [
    "a/b",
    "a%2Fb",
    "a%252Fb",
    "..",
    "%2E%2E",
    ".",
    "",
    "~",
    "%7E",
    "nul\x00byte",
    "ünïcødé/日本語🙂",
    "#c#~#h#",
    LONG_ID,
    "~" + hashlib.sha256(LONG_ID.encode()).hexdigest(),
    LONG_ID + "x",
]
ODD_NAMESPACES = ["", "a/b|c:..%ünï\x00"]


def test_odd_ids_round_trip_and_stay_isolated(backend: Backend) -> None:
    """Thread ids and namespaces with '/', '..', '%', NUL, unicode, empty and 1 KB come back
    exactly; ids that look alike ('a/b' vs 'a%2Fb', '' vs '~', a long id vs its hash) are
    separate threads whose objects and items all live under their own prefix."""
    saver = backend.saver()
    owned: dict[str, set[str]] = {}
    before: set[str] = set()
    for i, thread in enumerate(ODD_THREADS):
        for ns in ODD_NAMESPACES:
            values: dict[str, Any] = {"who": f"{i}|{ns}"}
            if ns == "":
                values["pad"] = os.urandom(20_000)  # a blob object under the thread too
            put(saver, thread, values, ns)
        now = set(backend.object_keys())
        owned[thread] = now - before
        before = now

    prefixes = {t: LAYOUT.thread_prefix(t) for t in ODD_THREADS}
    assert len(set(prefixes.values())) == len(ODD_THREADS)
    for t, p in prefixes.items():
        assert all(not q.startswith(p) for u, q in prefixes.items() if u != t)
        assert owned[t] and all(k.startswith(p) for k in owned[t]), t
        assert len(p.encode()) < 300  # 1 KB ids are hashed, keys stay short
    pks = {i["pk"]["S"] for i in backend.items()}
    assert pks == {LAYOUT.pk(t) for t in ODD_THREADS}

    fresh = backend.saver()
    for i, thread in enumerate(ODD_THREADS):
        listed = list(fresh.list(cfg(thread) | {"configurable": {"thread_id": thread}}))
        assert len(listed) == len(ODD_NAMESPACES)
        for ns in ODD_NAMESPACES:
            tup = fresh.get_tuple(cfg(thread, ns))
            assert tup is not None
            assert tup.config["configurable"]["thread_id"] == thread
            assert tup.config["configurable"]["checkpoint_ns"] == ns
            assert tup.checkpoint["channel_values"]["who"] == f"{i}|{ns}"
    everything = list(fresh.list(None))
    assert sorted({t.config["configurable"]["thread_id"] for t in everything}) == sorted(
        ODD_THREADS
    )

    fresh.delete_thread("a/b")
    assert fresh.get_tuple(cfg("a/b")) is None
    for survivor in ("a%2Fb", "a%252Fb"):
        tup = backend.saver().get_tuple(cfg(survivor))
        assert tup is not None
        assert tup.config["configurable"]["thread_id"] == survivor
    assert owned["a%2Fb"] <= set(backend.object_keys())


def test_odd_ids_through_a_graph(backend: Backend) -> None:
    """A graph run on a thread id with '/', NUL and unicode is read back by a new saver."""
    thread = "team/../ünï\x00%2F"
    graph = build_echo(backend.saver())
    graph.invoke({"small": "hello", "big": b"x" * 30_000}, cfg(thread))
    state = build_echo(backend.saver()).get_state(cfg(thread))
    assert state.values == {"small": "hello", "big": b"x" * 30_000}
    assert state.config["configurable"]["thread_id"] == thread
    assert build_echo(backend.saver()).get_state(cfg("team/..")).values == {}


def test_errors_share_one_base(request_log: RequestLog) -> None:
    """Every error raised on purpose derives from S3SaverError (one except clause catches all)."""
    saver = offline_saver(request_log)
    for call in (
        lambda: saver.get_tuple({}),
        lambda: put(saver, "t", {"x": object()}),
        lambda: saver.get_tuple(cfg("t", checkpoint_id="a/b")),
    ):
        with pytest.raises(S3SaverError):
            call()


def test_misspelt_option_names_it_and_the_closest_valid_one() -> None:
    """A misspelt keyword is our InvalidConfigError naming it and what was meant, not a
    TypeError naming an internal class."""
    for saver in (S3Saver, AsyncS3Saver):
        with pytest.raises(InvalidConfigError) as info:
            saver(bucket="b", table="t", max_concurency=4)  # type: ignore[call-arg]
        message = str(info.value)
        assert saver.__name__ in message and "'max_concurency'" in message
        assert "did you mean 'max_concurrency'" in message
        with pytest.raises(InvalidConfigError, match=r"'endpoint'.*did you mean 'endpoint_url'"):
            saver(bucket="b", table="t", endpoint="http://x")  # type: ignore[call-arg]
