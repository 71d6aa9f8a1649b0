"""Which puts are conditional: the single-writer guard, bound to the run.

Theory of operation (the full rules are in ``docs/concurrency.md``):

* A LangGraph run starts with ``get_tuple``. Without a ``checkpoint_id`` it asks
  for *the latest* checkpoint P: the run means to continue the thread from its
  head. The saver answers with a config whose ``thread_id`` is a :class:`HeadRead`,
  a ``str`` equal to the thread id that also remembers "the latest of namespace
  ns, as read". LangGraph copies that config's values into every ``put`` of the
  run (``checkpoint_config`` in ``langgraph/pregel/_loop.py``), so each ``put`` of
  that run, in that namespace, commits only if its parent is still the head.
  Two runs that resumed the same head race; exactly one commits.
* An exact read (``checkpoint_id`` given: replay, fork, ``update_state`` on any
  checkpoint, a snapshot reused later) answers with a plain ``thread_id``, which
  replaces whatever the caller's config carried. Its puts are deliberate forks
  and are never refused, exactly as with ``InMemorySaver``.
* A caller that resumes pinned to a checkpoint it saw as the head, and wants that
  resume refused if the thread has moved on (a duplicate approval webhook), says
  so with :func:`continuation`.

The mark lives in the *value* of ``thread_id``, not in a key of its own, so the
configs LangGraph hands back (``get_state``, ``get_state_history``) compare equal to
``InMemorySaver``'s, and nothing is copied into checkpoint metadata. Nothing is
remembered in the saver: whether a put is guarded depends only on the config the
run carries, so a sequential program can never be refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_s3.errors import InvalidConfigError

#: Configurable key set by :func:`continuation`; ``__`` keeps it out of metadata.
CONTINUE_KEY = "__langgraph_s3_continue__"


class HeadRead(str):
    """A thread id that also says: this run read ``head`` as the latest of ``ns``.

    Compares, hashes and serializes as the plain thread id.
    """

    ns: str
    head: str

    def __new__(cls, thread_id: str, ns: str, head: str) -> HeadRead:
        obj = super().__new__(cls, thread_id)
        obj.ns = ns
        obj.head = head
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (HeadRead, (str(self), self.ns, self.head))

    def __eq__(self, other: object) -> bool:
        # With a plain str on the left, Python lets a str subclass on the right that
        # defines its own __eq__ (a test's "any string" matcher) answer first. Do the
        # same, so a HeadRead compares exactly as the plain thread id would.
        if (
            isinstance(other, str)
            and not isinstance(other, HeadRead)
            and type(other).__eq__ is not str.__eq__
        ):
            answer = type(other).__eq__(other, self)
            if answer is not NotImplemented:
                return bool(answer)
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


def read_latest(thread_id: str, ns: str, head: str) -> HeadRead:
    """The ``thread_id`` a read of the latest checkpoint answers with."""
    return HeadRead(thread_id, ns, head)


def read_exact(requested: Mapping[str, Any], thread_id: str, ns: str, cid: str) -> Any:
    """The ``thread_id`` value an exact read answers with.

    The caller's own value (a fork), with any :class:`HeadRead` it carried from an
    earlier read of the latest cleared, unless the caller asked with
    :func:`continuation` to continue from exactly this checkpoint.
    """
    if requested.get(CONTINUE_KEY) == cid:
        return HeadRead(thread_id, ns, cid)
    value = requested.get("thread_id")
    return str(value) if isinstance(value, HeadRead) else value


def is_continuation(config: RunnableConfig, ns: str, parent_id: str | None) -> bool:
    """Whether a put must find its parent still the head of ``ns`` (no head: none yet)."""
    conf = config.get("configurable", {})
    thread_id = conf.get("thread_id")
    if isinstance(thread_id, HeadRead):
        return thread_id.ns == ns
    # A run asked to start a thread (continuation() without a checkpoint_id) read an
    # empty thread, which no thread id can carry: its first put must create the head.
    return parent_id is None and conf.get(CONTINUE_KEY) == ""


def continuation(config: RunnableConfig) -> RunnableConfig:
    """A config whose run commits only while it continues the thread's head.

    Pinned to a checkpoint (``checkpoint_id`` given), the run resumes from that
    checkpoint and commits only while it is the head: use it to resume from the
    checkpoint you checked (the one ``graph.get_state`` showed waiting for an
    approval) when a resume that arrives after the thread has moved on must be
    refused instead of forking it. Without a ``checkpoint_id``, the run continues
    the latest checkpoint as any run does, and if the thread is empty its first
    checkpoint commits only if no other run created the thread meanwhile.

    .. code-block:: python

        snapshot = graph.get_state(cfg)
        if snapshot.interrupts:
            graph.invoke(Command(resume=answer), continuation(snapshot.config),
                         durability="sync")

    A put that finds the head moved raises ``CheckpointConflictError`` and commits
    nothing. Without ``continuation``, a run from an explicit ``checkpoint_id`` is
    a deliberate fork, as LangGraph's time travel expects, and a run that starts
    a new thread is not checked against another one starting it.

    Args:
        config: A config naming ``thread_id`` and optionally ``checkpoint_id``.

    Returns:
        A copy of ``config`` that carries the request.

    Raises:
        InvalidConfigError: If ``config`` has no ``configurable`` dict or its
            ``checkpoint_id`` is not a non-empty string.
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise InvalidConfigError(
            "continuation() takes a config like {'configurable': {'thread_id': ...}}"
        )
    conf = dict(config["configurable"])
    cid = conf.get("checkpoint_id")
    if cid is not None and (not isinstance(cid, str) or not cid):
        raise InvalidConfigError(
            f"continuation(): checkpoint_id must be a non-empty string, got {cid!r}"
        )
    conf[CONTINUE_KEY] = cid or ""
    return {**config, "configurable": conf}
