"""The saver's protocol, free of I/O: one implementation for both savers.

Theory of operation. Every operation of a saver is a *flow*: a generator that
yields the I/O it needs as :mod:`langgraph_s3.operations` values (a list of them
means "all at once") and is sent their results. ``S3Saver`` and ``AsyncS3Saver``
only run flows (:mod:`langgraph_s3.transport` turns each operation into a boto
call), so both savers make the same requests in the same order and read and write
exactly the same bytes. Flows are plain functions that take the saver's state
(:class:`SaverCore`) as their first argument.

One module per question (docs/architecture.md draws them):

- ``config``: what a saver is configured with; reading LangGraph's configs.
- ``schema``: the DynamoDB item schema and the requests that write it.
- ``state``: what a saver holds between calls (settings, caches, uploads).
- ``values``: how a value is stored (inline or blobs; bodies in the index).
- ``objects``: reading, verifying, uploading, listing and deleting S3 objects.
- ``index``: pages of queries and scans, batch writes.
- ``commit``: how a put is committed; cross-region ownership.
- ``writes``: how pending writes are stored.
- ``read``: how a checkpoint tuple is read and assembled.
- ``history``: listing, and the parent-chain walk (delta history, prune).
- ``threads``: delete, delete by run, copy, prune.
- ``setup``: creating the bucket and table.
- ``inventory``: which threads are stored, how active and large (gc, the CLI).

The storage layout is described in ``docs/layout.md`` and the commit and
conflict rules in ``docs/concurrency.md``.
"""

from langgraph_s3.core.config import (
    DEFAULT_INLINE_THRESHOLD,
    INDEX_INLINE_LIMIT,
    WRITE_INLINE_THRESHOLD,
    SaverOptions,
    check_options,
)
from langgraph_s3.core.state import SaverCore

__all__ = [
    "DEFAULT_INLINE_THRESHOLD",
    "INDEX_INLINE_LIMIT",
    "WRITE_INLINE_THRESHOLD",
    "SaverCore",
    "SaverOptions",
    "check_options",
]
