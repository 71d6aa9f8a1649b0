"""Upload sharing: one upload per chunk at a time, whoever else needs it waits.

LangGraph hands a new value to the saver twice at once (a task's pending write and
the next checkpoint). The first flow to place a chunk (in a pack of its own, or as a
loose blob) owns its upload; another flow that needs the same chunk meanwhile
references it where the owner put it and waits on the owner's future
(``WaitUpload``) instead of uploading the same bytes again. If the owner's upload
fails, the waiting flow places the chunk again itself. Chunk lists are shared the
same way, by their thread and the chunks they list (their bytes depend on where
they were placed, and they name packs of their own thread's folder).
This is the only state in the core that two flows touch at the same time, hence the
lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from langgraph_s3.core.entries import InIndex, Listed, ListIdentity, Location, Span

#: What a flow's own chunks became: object key -> (its body, the chunk keys in it and
#: where each is in it; None for a loose blob). A chunk item is an "object" of its own,
#: under its chunk key, where ``IN_INDEX``: its body is the item's frame.
Placement = dict[str, tuple[bytes, dict[str, Location]]]
#: Places a flow's fresh chunks, given where the others are, and builds the chunk
#: lists not being uploaded already (by identity): objects, and per list identity
#: its chunk key and entry.
Place = Callable[
    [dict[str, bytes], dict[str, Location], list[ListIdentity]],
    tuple[Placement, dict[ListIdentity, tuple[str, Listed]]],
]


@dataclass
class Shares:
    """A flow's part of the uploads in progress."""

    #: object key -> body, for the objects this flow uploads
    bodies: dict[str, bytes] = field(default_factory=dict)
    #: object key -> the future its upload resolves (True: stored)
    done: dict[str, Future[bool]] = field(default_factory=dict)
    #: object key -> the chunk keys it carries
    members: dict[str, list[str]] = field(default_factory=dict)
    #: chunk key -> where it is (None: a loose blob), for every chunk asked about
    where: dict[str, Location] = field(default_factory=dict)
    #: chunk key -> the future of another flow's upload carrying it
    waits: dict[str, Future[bool]] = field(default_factory=dict)
    #: chunk list identity -> the list, made by this flow or another
    lists: dict[ListIdentity, Listed] = field(default_factory=dict)
    #: chunk list identity -> key of the object of this flow that carries it
    carried: dict[ListIdentity, str] = field(default_factory=dict)


class SharedUploads:
    """The chunks being uploaded, by chunk key: the future of the object carrying each
    and where in that object it is."""

    def __init__(self) -> None:
        self._inflight: dict[str, tuple[Future[bool], Location]] = {}
        #: chunk list identity -> the upload carrying it, its chunk key, the list, and
        #: the other uploads its maker waits for that carry chunks the list names
        self._lists: dict[
            ListIdentity, tuple[Future[bool], str, Listed, dict[str, Future[bool]]]
        ] = {}
        self._lock = threading.Lock()

    def share(
        self,
        chunks: Mapping[str, bytes],
        known: Callable[[str], Span | InIndex | bool | None],
        place: Place,
        lists: Iterable[ListIdentity] = (),
        known_list: Callable[[ListIdentity], Listed | None] = lambda _: None,
    ) -> Shares:
        """Split a flow's new chunks (chunk key -> framed chunk) and chunk lists (by
        identity): those another flow is uploading (wait for it), chunks known to
        exist (reference them), and the rest, which ``place`` turns into this flow's
        objects (upload them), given where the others are."""
        shares = Shares()
        with self._lock:
            fresh: dict[str, bytes] = {}
            for key, frame in chunks.items():
                owner = self._inflight.get(key)
                if owner is not None and _usable(owner[0]):
                    shares.waits[key], shares.where[key] = owner
                    continue
                stored = known(key)
                if stored is not None:
                    shares.where[key] = None if isinstance(stored, bool) else stored
                else:
                    fresh[key] = frame
            todo = []
            for ident in dict.fromkeys(lists):
                maker = self._lists.get(ident)
                # The list names its chunks where its maker put or found them: it is
                # only as good as every upload that flow waits for.
                if maker is not None and all(map(_usable, [maker[0], *maker[3].values()])):
                    upload, key, listed, deps = maker
                    shares.lists[ident] = listed
                    shares.waits[key], shares.where[key] = upload, listed.span
                    for dep, dep_upload in deps.items():
                        shares.waits.setdefault(dep, dep_upload)
                elif (done := known_list(ident)) is not None:
                    shares.lists[ident] = done  # uploaded already, by this saver
                else:
                    todo.append(ident)
            placement, made = place(fresh, dict(shares.where), todo)
            for obj, (body, spans) in placement.items():
                fut: Future[bool] = Future()
                shares.bodies[obj], shares.done[obj] = body, fut
                shares.members[obj] = list(spans)
                for key, span in spans.items():
                    shares.where[key] = span
                    self._inflight[key] = (fut, span)
            for ident, (key, listed) in made.items():
                shares.lists[ident] = listed
                carrier = next((o for o, (_, spans) in placement.items() if key in spans), None)
                if carrier is not None:  # else an existing list is re-used, nothing to share
                    shares.carried[ident] = carrier
                    deps = _named_waits(shares, listed)
                    self._lists[ident] = (shares.done[carrier], key, listed, deps)
        return shares

    def release(
        self,
        shares: Shares,
        uploaded: Callable[[str], None],
        failed: Callable[[str], None],
        stored_list: Callable[[ListIdentity, Listed], None] = lambda _i, _l: None,
    ) -> None:
        """End this flow's uploads, calling ``uploaded`` or ``failed`` for each chunk,
        and ``stored_list`` for each chunk list that is stored with every chunk it names.

        The callbacks run under the lock, so no other flow places a chunk or a list
        between its upload ending and the caches learning the outcome. A future the
        driver never resolved (the flow stopped early) counts as failed and is resolved
        so, waking anyone who waits on it.
        """
        with self._lock:
            for ident, obj in shares.carried.items():
                if self._lists.get(ident, (None,))[0] is shares.done[obj]:
                    del self._lists[ident]
            for obj, fut in shares.done.items():
                if not fut.done():
                    fut.set_result(False)
                for key in shares.members[obj]:
                    if self._inflight.get(key, (None, None))[0] is fut:
                        del self._inflight[key]
                    (uploaded if fut.result() else failed)(key)
            for ident, obj in shares.carried.items():
                listed = shares.lists[ident]
                needed = [shares.done[obj], *_named_waits(shares, listed).values()]
                if all(f.done() and f.result() for f in needed):
                    stored_list(ident, listed)


def _usable(upload: Future[bool]) -> bool:
    # An upload that already failed (its flow has not released it yet) is nobody's:
    # the flow that needs its content places it itself.
    return not (upload.done() and not upload.result())


def _named_waits(shares: Shares, listed: Listed) -> dict[str, Future[bool]]:
    """The other flows' uploads ``shares`` waits for that may carry a chunk ``listed``
    names (loose ones are named by digest alone, so every loose one counts)."""
    named = set(listed.blobs.spans or ()) if listed.blobs is not None else set()
    return {
        key: fut
        for key, fut in shares.waits.items()
        if shares.where.get(key) is None or shares.where[key] in named
    }
