"""A scripted driver for flows: a test plays the I/O side of a flow by hand.

A flow (see :mod:`langgraph_s3.core`) yields operations, or lists of them to be
performed at once, and is sent their results. ``Script`` advances it one answer at
a time, so a test states in order what the flow asks for and what it gets back::

    script = Script(commit.commit(core, item, None, guarded=False))
    txn = script.expect(Transact, None) # the flow asks for a transaction; it commits
    assert txn.method == "transact_write_items"
    script.returns()                    # and the flow ends

- ``expect(match, result)``: the pending request must match, then gets ``result``;
  returns the request, for closer checks. ``match`` is a type, a request equal to
  the pending one, a predicate, or a list of those for a concurrent batch (whose
  ``result`` is then the list of results).
- ``step(result)`` / ``throw(exc)``: answer (or fail) the pending request unchecked;
  return the next one (``None`` once the flow has ended).
- ``emits()``: the pending value is an :class:`~langgraph_s3.core.Emit` (from
  ``history.list_checkpoints``); returns its tuple and resumes the flow.
- ``returns()`` / ``raises(ExcType)``: how the flow ended; its value, or its error.
- ``drain(answer)``: answer every remaining request with ``answer(request)``
  (lists element by element) and return what the flow returns.

Like the real drivers, the script resolves the ``done`` future of an answered
``S3Put`` (``True``; ``False`` when ``throw`` fails it), which wakes another flow's
``WaitUpload`` and tells upload sharing whether the blob now exists.

An error the flow raises is kept until ``raises`` claims it; any other call then
re-raises it, so an unexpected failure shows its own traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from langgraph_s3.operations import Emit, S3Put

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

#: What ``expect`` accepts for one request.
Match = type | Callable[[Any], bool] | object

_RUNNING = object()


class Script(Generic[T]):
    """Drive ``flow`` step by step (see the module docstring)."""

    def __init__(self, flow: Generator[Any, Any, T]) -> None:
        self._flow = flow
        self._value: Any = _RUNNING
        self._error: BaseException | None = None
        self.pending: Any = None
        self._advance(lambda: next(flow))

    # ------------------------------------------------------------------ driving
    def _advance(self, move: Callable[[], Any]) -> Any:
        self._check_running()
        try:
            self.pending = move()
        except StopIteration as stop:
            self.pending, self._value = None, stop.value
        except Exception as exc:
            self.pending, self._error = None, exc
        return self.pending

    def _check_running(self) -> None:
        if self._error is not None:
            raise self._error
        if self._value is not _RUNNING:
            raise AssertionError(f"the flow has already returned {self._value!r}")

    def step(self, result: Any = None) -> Any:
        """Send ``result`` for the pending request; returns the next one (None: ended)."""
        self._settle(True)
        return self._advance(lambda: self._flow.send(result))

    def throw(self, exc: BaseException) -> Any:
        """Fail the pending request with ``exc``; returns the next one (None: ended)."""
        self._settle(False)
        return self._advance(lambda: self._flow.throw(exc))

    def _settle(self, ok: bool) -> None:
        for op in self.pending if isinstance(self.pending, list) else [self.pending]:
            if isinstance(op, S3Put) and op.done is not None and not op.done.done():
                op.done.set_result(ok)

    def expect(self, match: Match | list[Match], result: Any = None) -> Any:
        """Check the pending request against ``match``, send ``result``; return the request."""
        self._check_running()
        op = self.pending
        assert _matches(op, match), f"the flow asked for {op!r}, expected {match!r}"
        self.step(result)
        return op

    def emits(self) -> Any:
        """The pending value is an ``Emit``: return its tuple and resume the flow."""
        self._check_running()
        assert isinstance(self.pending, Emit), f"the flow asked for {self.pending!r}, not an Emit"
        value = self.pending.value
        self.step(None)
        return value

    def drain(self, answer: Callable[[Any], Any]) -> T:
        """Answer every remaining request with ``answer`` and return the flow's value."""
        while self._value is _RUNNING and self._error is None:
            op = self.pending
            self.step([answer(o) for o in op] if isinstance(op, list) else answer(op))
        return self.returns()

    # ------------------------------------------------------------------ endings
    def returns(self) -> T:
        """The flow has ended normally: its return value."""
        if self._error is not None:
            raise self._error
        assert self._value is not _RUNNING, f"the flow still asks for {self.pending!r}"
        value: T = self._value
        return value

    def raises(self, kind: type[E]) -> E:
        """The flow has ended with an error of type ``kind``: that error."""
        error = self._error
        assert error is not None, (
            f"the flow did not fail: it returned {self._value!r}"
            if self._value is not _RUNNING
            else f"the flow did not fail: it asks for {self.pending!r}"
        )
        if not isinstance(error, kind):
            raise error
        self._error = None
        self._value = None
        return error


def _matches(op: Any, match: Any) -> bool:
    if isinstance(match, list):
        return (
            isinstance(op, list)
            and len(op) == len(match)
            and all(_matches(o, m) for o, m in zip(op, match, strict=True))
        )
    if isinstance(match, type):
        return isinstance(op, match)
    if callable(match):
        return bool(match(op))
    return bool(op == match)
