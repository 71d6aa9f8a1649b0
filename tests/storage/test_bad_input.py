"""Bad input: every refused input or missing resource is a typed error that says what
is wrong, raised before anything is stored (damaged storage: test_damaged_storage.py)."""

from __future__ import annotations

import hashlib
import os
import pickle
import uuid
from collections.abc import Callable
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
    InvalidConfigError,
    S3Saver,
    S3SaverError,
    SerializationError,
    StorageNotFoundError,
)
from langgraph_s3.core.packs import PACK_MAX
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


def test_a_missing_bucket_shows_at_the_first_s3_request(backend: Backend) -> None:
    """A saver does not check its bucket (no HeadBucket on the way of a run): checkpoints
    that fit in the index commit through a saver whose bucket does not exist, and the
    first request that needs S3 raises StorageNotFoundError naming the bucket, before
    its checkpoint is committed."""
    saver, missing = saver_without_bucket(backend)
    small = put(saver, "t", {"x": 1})
    tup = saver.get_tuple(cfg("t"))
    assert (
        tup is not None
        and tup.config["configurable"]["checkpoint_id"] == (small["configurable"]["checkpoint_id"])
    )
    cp = make_checkpoint({"x": 2, "v": os.urandom(30_000)}, version="2")
    expect_error(
        StorageNotFoundError,
        lambda: saver.put(tup.config, cp, {"source": "loop", "step": 1}, {"x": "2", "v": "2"}),
        missing,
        "setup()",
    )
    latest = backend.saver().get_tuple(cfg("t"))
    assert latest is not None and latest.checkpoint["id"] == small["configurable"]["checkpoint_id"]


async def test_a_missing_bucket_shows_at_the_first_s3_request_async(
    server_backend: Backend,
) -> None:
    """AsyncS3Saver reports a missing bucket at its first S3 request the same way."""
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    async with AsyncS3Saver(
        bucket=missing,
        table=server_backend.table,
        region_name=REGION,
        endpoint_url=server_backend.endpoint_url,
    ) as saver:
        cp = make_checkpoint({"v": os.urandom(30_000)})
        with pytest.raises(StorageNotFoundError, match=rf"{missing}.*setup\(\)"):
            await saver.aput(cfg("t"), cp, {"source": "loop", "step": 0}, {"v": "1"})
        assert await saver.aget_tuple(cfg("t")) is None


def test_a_saver_sends_no_bucket_check(backend: Backend, request_log: RequestLog) -> None:
    """A new saver's first get_tuple is the index query alone, and puts whose
    checkpoints fit in the index send nothing to S3: no HeadBucket, ever."""
    put(backend.saver(), "t", {"x": 1})
    saver = backend.saver(
        s3_client=request_log.attach(backend.s3()),
        dynamodb_client=request_log.attach(backend.dynamodb()),
    )
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert request_log.calls == [("dynamodb", "Query")]
    for i in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"x": i}
        cp["channel_versions"] = {"x": str(i + 2)}
        tup_config = saver.put(tup.config, cp, {"source": "loop", "step": i}, {"x": str(i + 2)})
        tup = saver.get_tuple(tup_config)
        assert tup is not None
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


class EchoState(TypedDict, total=False):
    small: str
    big: bytes


def build_echo(checkpointer: Any) -> Any:
    builder = StateGraph(EchoState)
    builder.add_node("echo", lambda s: {})
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------- sizes and ids
def blob_sizes(backend: Backend) -> list[int]:
    s3 = backend.s3()
    listing = s3.list_objects_v2(Bucket=backend.bucket)["Contents"]
    return [o["Size"] for o in listing if "/b/" in o["Key"]]


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
    # chunked (the 50 rotations share most chunks) into packs of at most PACK_MAX bytes
    sizes = blob_sizes(inproc_backend)
    assert sum(sizes) < len(value) / 10 and max(sizes) <= PACK_MAX


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
        # A required name misspelt, or spelt as another saver spells it (DynamoDBSaver's
        # table_name), is named too, not a TypeError about a missing argument.
        with pytest.raises(InvalidConfigError, match=r"'tabel'.*did you mean 'table'"):
            saver(bucket="b", tabel="t")  # type: ignore[call-arg]
        with pytest.raises(InvalidConfigError, match=r"'table_name'.*did you mean 'table'"):
            saver(bucket="b", table_name="t")  # type: ignore[call-arg]
        with pytest.raises(InvalidConfigError, match="table is required"):
            saver(bucket="b")


def test_connection_string_mistakes_name_the_fix() -> None:
    with pytest.raises(InvalidConfigError, match=r"'tabel'.*did you mean 'table'"):
        S3Saver.from_conn_string("s3://b?tabel=t").__enter__()
    with pytest.raises(InvalidConfigError, match=r"needs http:// or https://.*'http://h:1'"):
        S3Saver.from_conn_string("s3://b?table=t&endpoint_url=h:1").__enter__()


def test_testing_helpers_without_moto_name_the_extra() -> None:
    """Without the ``testing`` extra, importing langgraph_s3.testing says what to install."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['moto'] = None\n"  # as if moto were not installed
        "try:\n    import langgraph_s3.testing\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("MissingDependencyError")
    assert "pip install 'langgraph-s3[testing]'" in done.stdout


def test_value_another_serializer_wrote_is_undecodable_not_damaged(
    inproc_backend: Backend,
) -> None:
    """Intact values written with an EncryptedSerializer, read with another serde: an
    UndecodableValueError (still a CorruptObjectError) that names serde=, not damage."""
    from langgraph_s3 import CorruptObjectError, UndecodableValueError

    encrypted = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
    put(inproc_backend.saver(serde=encrypted), "t", {"card": "4111"})
    with pytest.raises(UndecodableValueError, match="serde=") as info:
        inproc_backend.saver().get_tuple(cfg("t"))
    assert isinstance(info.value, CorruptObjectError)
    other = EncryptedSerializer.from_pycryptodome_aes(key=b"o" * 32)
    with pytest.raises(UndecodableValueError):
        inproc_backend.saver(serde=other).get_tuple(cfg("t"))
    tup = inproc_backend.saver(serde=encrypted).get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"]["card"] == "4111"
