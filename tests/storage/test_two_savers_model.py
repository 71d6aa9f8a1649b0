"""A model test of warm savers sharing one bucket and table: Hypothesis drives three
``S3Saver`` instances (as warm Lambda containers, each with its own caches)
through puts, pending writes, forks, deletes, copies, prunes, ``delete_for_runs``
and garbage collection, and after every step compares what each of them, and a
cold saver, reads with an ``InMemorySaver`` that saw the same calls (the model;
``copy_thread``, ``prune`` and ``delete_for_runs``, which it does not implement, are
applied to its storage by hand).

What it hunts: a cache that vouches for stored state (``core/state.py`` ``Caches``,
``Encryption.keys``) and goes stale through another saver's call, so that a later
put names an object that is gone, or a read returns other values.

Time is a test clock (``Clock``): the savers' caches trust what they know for
``TTL`` test seconds, and the collector runs with ``GRACE``, which keeps the
documented rule ``grace > 2 x (cache_ttl + longest put)`` by a wide margin (a put
here takes well under a second). A rule advances the clock.

A deleted thread id is used again by any saver at once (docs/retention.md, "Limits":
a read finding no checkpoint, or a first checkpoint, makes a warm saver forget the
thread). What the documents rule out is not done: runs stop before their thread is
deleted or re-encrypted (a superstep continues only the saver's own run while its
last checkpoint is still the thread's latest).

What it found (a thread id deleted and started again elsewhere, read or continued by
a warm saver that knew the old thread) is pinned by plain tests in
``test_reuse_elsewhere.py``, all fixed.

``LGS3_MODEL_EXAMPLES`` sets the number of examples per variant and
``LGS3_MODEL_STEPS`` the steps per example (defaults below: the CI size); a search
runs e.g. ``LGS3_MODEL_EXAMPLES=150``.
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from moto import mock_aws

from langgraph_s3 import (
    Encryption,
    S3Saver,
    ThreadExistsError,
    gc,
)
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import REGION

EXAMPLES = int(os.environ.get("LGS3_MODEL_EXAMPLES", "5"))
STEPS = int(os.environ.get("LGS3_MODEL_STEPS", "30"))

SAVERS = 3
THREADS = ("t1", "t2")
RUNS = ("r1", "r2", "r3")
TASKS = ("task-a", "task-b")
#: Test seconds a saver trusts what it knows exists (its ``cache_ttl``) ...
TTL = 60.0
#: ... and the collector's grace: more than 2 x (TTL + the longest put).
GRACE = 300.0
#: Idle time after which the collector expires a thread, and how near it no verdict
#: is checked (the clock also runs while the test does).
IDLE = 1000.0
SLACK = 120.0


def _noise(seed: str, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _message(i: int) -> dict[str, str]:
    rng = random.Random(f"message-{i}")
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(400))
    return {"role": ("user", "ai")[i % 2], "content": f"{i}: {words} {rng.getrandbits(64):x}"}


#: Channel values, the same in every thread and saver (so blobs recur): small values
#: (in the body), a 40 KB value (one blob), 200 KB values (chunks), and a message list
#: that grows by appending (pieces, then stable chunks).
SMALL: list[Any] = ["hi", 7, {"k": "v"}, "x" * 300]
DOC = [_noise(f"doc-{i}", 40_000) for i in range(2)]
BIG = [_noise(f"big-{i}", 200_000) for i in range(2)]
MESSAGES = [_message(i) for i in range(120)]
CHANNELS = ("small", "doc", "big", "msgs")

changes_st = st.lists(
    st.tuples(st.sampled_from(CHANNELS), st.integers(0, 3)), min_size=1, max_size=3
)
saver_st = st.integers(0, SAVERS - 1)
thread_st = st.sampled_from(THREADS)


def new_value(channel: str, i: int, old: Any) -> Any:
    """Channel ``channel``'s next value: a pick from its pool, or for ``msgs`` the
    list with ``4 * i`` more messages (``i == 0``: empty again)."""
    if channel == "small":
        return SMALL[i]
    if channel == "doc":
        return DOC[i % 2]
    if channel == "big":
        return BIG[i % 2]
    if i == 0:
        return []
    old = list(old or [])
    return old + [MESSAGES[(len(old) + j) % len(MESSAGES)] for j in range(4 * i)]


def cfg(thread: str, cid: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def summary(tup: CheckpointTuple | None) -> Any:
    """What a reader must agree on: ids, values, versions, metadata, parent, writes."""
    if tup is None:
        return None
    cp = tup.checkpoint
    parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
    return {
        "id": cp["id"],
        "config": tup.config["configurable"].get("checkpoint_id"),
        "values": cp["channel_values"],
        "versions": cp["channel_versions"],
        "metadata": tup.metadata,
        "parent": parent,
        "writes": list(tup.pending_writes or []),
    }


class Clock:
    """Wall and monotonic time, both moved forward together by ``advance``."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


class Storage:
    """One bucket and table (in the test's moto), and the clients every saver shares."""

    s3: Any = None
    dynamodb: Any = None
    ring: StaticKeyRing | None = None
    counter = 0

    @classmethod
    def clients(cls) -> None:
        if cls.s3 is None:
            cls.s3 = boto3.client("s3", region_name=REGION)
            cls.dynamodb = boto3.client("dynamodb", region_name=REGION)


class TwoSavers(RuleBasedStateMachine):
    """Warm savers A, B, C over one bucket and table, checked against ``InMemorySaver``."""

    encrypted = False

    def __init__(self) -> None:
        super().__init__()
        Storage.clients()
        Storage.counter += 1
        self.bucket = self.table = f"model-{Storage.counter}-{random.getrandbits(32):08x}"
        self.ring = StaticKeyRing({"r": os.urandom(32)}, current="r") if self.encrypted else None
        self.clock = Clock()
        self.new_saver().setup()
        self.savers = [self.new_saver() for _ in range(SAVERS)]
        self.model = InMemorySaver()
        #: run id of each checkpoint the model holds (for delete_for_runs).
        self.run_of: dict[str, str] = {}
        self.log: list[str] = []
        #: thread -> test time of its last checkpoint (retention's idle time).
        self.last_put: dict[str, float] = {}
        #: (saver, thread) -> the last checkpoint of the saver's run on the thread.
        self.running: dict[tuple[int, str], CheckpointTuple] = {}

    def new_saver(self) -> S3Saver:
        saver = S3Saver(
            bucket=self.bucket,
            table=self.table,
            s3_client=Storage.s3,
            dynamodb_client=Storage.dynamodb,
            cache_ttl=TTL,
            clock=self.clock.time,
            encryption=None if self.ring is None else Encryption(self.ring),
        )
        # The caches time their entries with their own monotonic clock: the test's.
        for cache in vars(saver.caches).values():
            cache._clock = self.clock.monotonic
        return saver

    # ------------------------------------------------------------------ the model
    def model_threads(self) -> list[str]:
        return [t for t in THREADS if self.model_ids(t)]

    def model_ids(self, thread: str) -> list[str]:
        return [t.config["configurable"]["checkpoint_id"] for t in self.model.list(cfg(thread))]

    # ------------------------------------------------------------------ the rules
    @rule(s=saver_st, thread=thread_st, changes=changes_st, run=st.sampled_from(RUNS))
    def put_latest(self, s: int, thread: str, changes: list[tuple[str, int]], run: str) -> None:
        """A superstep as LangGraph runs it: read the latest, put after it."""
        tup = self.savers[s].get_tuple(cfg(thread))
        assert summary(tup) == summary(self.model.get_tuple(cfg(thread)))
        self.put_after(s, thread, tup, changes, run)

    @precondition(lambda self: bool(self.model_threads()))
    @rule(
        s=saver_st,
        thread=thread_st,
        pos=st.integers(0, 50),
        changes=changes_st,
        run=st.sampled_from(RUNS),
    )
    def fork(self, s: int, thread: str, pos: int, changes: list[Any], run: str) -> None:
        """Time travel: put after an older checkpoint, read first."""
        ids = self.model_ids(thread)
        if not ids:
            return
        cid = ids[pos % len(ids)]
        tup = self.savers[s].get_tuple(cfg(thread, cid))
        assert tup is not None
        self.put_after(s, thread, tup, changes, run)

    @precondition(lambda self: bool(self.model_threads()))
    @rule(s=saver_st, thread=thread_st, changes=changes_st)
    def superstep(self, s: int, thread: str, changes: list[tuple[str, int]]) -> None:
        """The next superstep of a run: put after the run's last checkpoint, unread
        (as LangGraph does within one invoke), while it is still the thread's latest."""
        tup = self.running.get((s, thread))
        latest = self.model.get_tuple(cfg(thread))
        if tup is None or latest is None or latest.checkpoint["id"] != tup.checkpoint["id"]:
            return
        self.put_after(s, thread, tup, changes, str(tup.metadata["run_id"]))

    def put_after(
        self, s: int, thread: str, tup: CheckpointTuple | None, changes: list[Any], run: str
    ) -> None:
        saver = self.savers[s]
        values = dict(tup.checkpoint["channel_values"]) if tup else {}
        versions = dict(tup.checkpoint["channel_versions"]) if tup else {}
        new_versions = {}
        for channel, i in changes:
            values[channel] = new_value(channel, i, values.get(channel))
            versions[channel] = new_versions[channel] = saver.get_next_version(
                versions.get(channel), None
            )
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=len(self.log)))
        cp["channel_values"] = values
        cp["channel_versions"] = versions
        step = tup.metadata.get("step", 0) + 1 if tup else 0
        metadata: Any = {"source": "loop", "step": step, "run_id": run}
        config = tup.config if tup else cfg(thread)
        self.log.append(f"{'ABC'[s]}.put({thread}, {sorted(new_versions)}, {run})")
        got = saver.put(config, copy.deepcopy(cp), dict(metadata), dict(new_versions))
        want = self.model.put(config, copy.deepcopy(cp), dict(metadata), dict(new_versions))
        assert got["configurable"]["checkpoint_id"] == want["configurable"]["checkpoint_id"]
        self.run_of[cp["id"]] = run
        self.last_put[thread] = self.clock.time()
        # What the run's next superstep continues from, as LangGraph keeps it: the
        # config it read (with the saver's head mark) naming the new checkpoint.
        cp["channel_values"] = values
        follow = {"configurable": {**config["configurable"], "checkpoint_id": cp["id"]}}
        self.running[(s, thread)] = CheckpointTuple(follow, cp, metadata)

    def end_runs(self, thread: str | None = None) -> None:
        """Runs stop before their thread is deleted (docs/security.md, the caveat)."""
        for key in [k for k in self.running if thread is None or k[1] == thread]:
            del self.running[key]

    @precondition(lambda self: bool(self.model_threads()))
    @rule(
        s=saver_st,
        thread=thread_st,
        writes=st.lists(
            st.tuples(st.sampled_from(CHANNELS), st.integers(0, 3)), min_size=1, max_size=3
        ),
        task=st.sampled_from(TASKS),
    )
    def put_writes(self, s: int, thread: str, writes: list[Any], task: str) -> None:
        """A task's writes on the latest checkpoint."""
        tup = self.savers[s].get_tuple(cfg(thread))
        if tup is None:
            return
        old = tup.checkpoint["channel_values"]
        ws = [(ch, new_value(ch, i, old.get(ch))) for ch, i in writes]
        self.log.append(f"{'ABC'[s]}.put_writes({thread}, {[w[0] for w in ws]}, {task})")
        self.savers[s].put_writes(tup.config, ws, task)
        self.model.put_writes(tup.config, ws, task)

    @rule(s=saver_st, thread=thread_st)
    def delete_thread(self, s: int, thread: str) -> None:
        self.log.append(f"{'ABC'[s]}.delete_thread({thread})")
        self.end_runs(thread)
        self.savers[s].delete_thread(thread)
        self.model.delete_thread(thread)

    @precondition(lambda self: bool(self.model_threads()))
    @rule(s=saver_st, src=thread_st, dst=thread_st)
    def copy_thread(self, s: int, src: str, dst: str) -> None:
        if src == dst:
            return
        self.log.append(f"{'ABC'[s]}.copy_thread({src}, {dst})")
        if self.model_ids(dst):
            with pytest.raises(ThreadExistsError):
                self.savers[s].copy_thread(src, dst)
            return
        # It reads the source (with the key s cached: the known stale-key read).
        self.savers[s].copy_thread(src, dst)
        m = self.model
        for ns, cps in m.storage.get(src, {}).items():
            m.storage[dst][ns] = copy.deepcopy(dict(cps))
        for (t, ns, cid), ws in list(m.writes.items()):
            if t == src:
                m.writes[(dst, ns, cid)] = copy.deepcopy(dict(ws))
        for (t, ns, ch, v), blob in list(m.blobs.items()):
            if t == src:
                m.blobs[(dst, ns, ch, v)] = blob
        if self.model_ids(dst):
            self.last_put[dst] = self.last_put[src]  # the heads are copied as they are

    @precondition(lambda self: bool(self.model_threads()))
    @rule(s=saver_st, thread=thread_st)
    def prune(self, s: int, thread: str) -> None:
        """keep_latest: each namespace's latest checkpoint, without its parent."""
        self.log.append(f"{'ABC'[s]}.prune({thread})")
        self.savers[s].prune([thread])
        m = self.model
        for ns, cps in m.storage.get(thread, {}).items():
            if not cps:
                continue
            latest = max(cps)
            for cid in [c for c in cps if c != latest]:
                del cps[cid]
                m.writes.pop((thread, ns, cid), None)
            body, md, _ = cps[latest]
            cps[latest] = (body, md, None)

    @precondition(lambda self: bool(self.model_threads()))
    @rule(s=saver_st, run=st.sampled_from(RUNS))
    def delete_for_runs(self, s: int, run: str) -> None:
        self.log.append(f"{'ABC'[s]}.delete_for_runs({run})")
        self.end_runs()
        self.savers[s].delete_for_runs([run])
        m = self.model
        for thread, by_ns in m.storage.items():
            for ns, cps in by_ns.items():
                for cid in [c for c in cps if self.run_of.get(c) == run]:
                    del cps[cid]
                    m.writes.pop((thread, ns, cid), None)

    @rule(dt=st.sampled_from([1.0, TTL / 2, TTL + 1, GRACE / 2, GRACE + 1, IDLE / 2]))
    def advance(self, dt: float) -> None:
        self.log.append(f"advance({dt})")
        self.clock.offset += dt

    @rule()
    def collect(self) -> None:
        self.log.append("gc")
        report = gc.collect(self.new_saver(), grace=GRACE)
        assert not report.errors, report.errors
        assert not report.threads_protected, report.threads_protected

    @rule()
    def collect_expiring(self) -> None:
        """A collection that also expires threads idle for ``IDLE`` (retention)."""
        self.log.append("gc(idle_ttl)")
        now = self.clock.time()
        report = gc.collect(self.new_saver(), grace=GRACE, idle_ttl=IDLE)
        assert not report.errors, report.errors
        expired = set(report.threads_expired)
        for thread in self.model_threads():
            idle = now - self.last_put[thread]
            # The clock also runs while the test does: no verdict near the limit.
            assert thread in expired or idle < IDLE + SLACK, (thread, idle, self.log)
            assert thread not in expired or idle > IDLE - SLACK, (thread, idle, self.log)
        for thread in expired:
            self.end_runs(thread)
            self.model.delete_thread(thread)

    # ------------------------------------------------------------------ invariants
    # Rules are drawn alike: these twins make puts, reads and deletes, the steps that
    # make caches stale and find it, as common as the rest together.
    @rule(s=saver_st, thread=thread_st, changes=changes_st, run=st.sampled_from(RUNS))
    def put_latest_twin(self, s: int, thread: str, changes: list[Any], run: str) -> None:
        self.put_latest(s, thread, changes, run)

    @rule(s=saver_st, thread=thread_st, changes=changes_st)
    def superstep_twin(self, s: int, thread: str, changes: list[Any]) -> None:
        self.superstep(s, thread, changes)

    @rule(s=saver_st, thread=thread_st)
    def read_twin(self, s: int, thread: str) -> None:
        self.read(s, thread)

    @rule(s=saver_st, thread=thread_st)
    def delete_twin(self, s: int, thread: str) -> None:
        self.delete_thread(s, thread)

    @rule(s=saver_st, thread=thread_st)
    def read(self, s: int, thread: str) -> None:
        """A warm saver reads a thread (``get_state``, ``get_state_history``).

        A rule, not an invariant: a read changes what a saver knows (one finding no
        checkpoint has it read the thread's key again), so reading every thread with
        every saver after every step would heal the very staleness hunted here.
        """
        self.log.append(f"{'ABC'[s]}.read({thread})")
        self.check(s, thread)

    @invariant()
    def a_cold_saver_reads_the_model(self) -> None:
        for thread in THREADS:
            self.check(None, thread)

    def teardown(self) -> None:
        """At the end every warm saver reads every thread."""
        for s in range(SAVERS):
            for thread in THREADS:
                self.check(s, thread)

    def check(self, s: int | None, thread: str) -> None:
        """Saver ``s`` (None: a cold one, which also reads each checkpoint by id)
        lists ``thread`` and reads its latest checkpoint as the model does."""
        want = [summary(t) for t in self.model.list(cfg(thread))]
        name = "cold" if s is None else "ABC"[s]
        reader = self.new_saver() if s is None else self.savers[s]
        where = f"{name} reading {thread} after {self.log}"

        def read(config: Any) -> Any:
            return summary(reader.get_tuple(config))

        listed = [summary(t) for t in reader.list(cfg(thread))]
        assert listed == want, where
        assert read(cfg(thread)) == (want[0] if want else None), where
        for one in want if s is None else []:
            assert read(cfg(thread, one["id"])) == one, where


def _settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        Storage.s3 = Storage.dynamodb = None
        yield
        Storage.s3 = Storage.dynamodb = None


def test_warm_savers_agree_with_the_model(moto: None) -> None:
    run_state_machine_as_test(TwoSavers, settings=_settings())


class SealedSavers(TwoSavers):
    """The same with ``encryption=``: each saver its own ``Encryption`` of one ring."""

    encrypted = True

    @rule(s=saver_st, thread=thread_st)
    def reencrypt_thread(self, s: int, thread: str) -> None:
        """A new data key for the thread, the old one shredded: the model is unchanged."""
        self.log.append(f"{'ABC'[s]}.reencrypt_thread({thread})")
        self.end_runs(thread)
        self.savers[s].reencrypt_thread(thread)


def test_warm_encrypted_savers_agree_with_the_model(moto: None) -> None:
    run_state_machine_as_test(SealedSavers, settings=_settings())
