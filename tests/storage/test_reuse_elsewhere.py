"""A thread id used again while warm savers still know the old thread: what the model
test (``test_two_savers_model.py``) found, as plain tests.

* Fixed: ``copy_thread`` onto a thread id another saver deleted sealed the copy under
  the copier's cached, shredded key and wrote no key item (``DataKeyError`` for
  every other reader).
* Fixed: a warm saver that loaded the thread's key could not read the thread started
  again elsewhere until its ``key_ttl`` ran out (``SealedObjectError`` or
  ``KeyVersionError``).
* Fixed: without encryption, a warm saver that knew the old thread and continued the
  one started again elsewhere named blobs deleted with the old thread
  (``MissingObjectError`` for every reader).

Both by the thread's incarnation (``schema.INCARNATION``), which a thread started
again carries anew: a saver that reads another one than it knew forgets what it
cached of the thread and reads its key again (``core/incarnations.py``).
"""

from __future__ import annotations

import os

import pytest

from langgraph_s3 import Encryption
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put
from tests.storage.test_two_savers_model import cfg


def test_a_copy_to_a_thread_id_deleted_elsewhere_is_sealed_under_a_stored_key(
    inproc_backend: Backend,
) -> None:
    """Warm A loaded dst's key; B deleted dst (shredding it); A copies a thread to dst.
    The copy was sealed under the shredded key, with no key item: nobody else could
    open it (``DataKeyError``), nor A after its ``key_ttl``."""
    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
    a = inproc_backend.saver(encryption=Encryption(ring))
    b = inproc_backend.saver(encryption=Encryption(ring))
    put(a, "dst", "old")
    put(a, "src", "source value")
    b.delete_thread("dst")
    a.copy_thread("src", "dst")
    cold = inproc_backend.saver(encryption=Encryption(ring))
    tup = cold.get_tuple(cfg("dst"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"v": "source value"}


@pytest.mark.parametrize("reencrypted", [False, True], ids=["same-version", "re-encrypted"])
def test_a_warm_saver_reads_a_thread_id_deleted_and_started_again_elsewhere(
    inproc_backend: Backend, reencrypted: bool
) -> None:
    """A conversation deleted and started again on container B; the next message
    reaches warm container A, which had loaded the thread's key."""
    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
    a = inproc_backend.saver(encryption=Encryption(ring))
    b = inproc_backend.saver(encryption=Encryption(ring))
    put(a, "t", "first conversation")
    if reencrypted:
        b.reencrypt_thread("t")
        assert a.get_tuple(cfg("t")) is not None  # A loads version 2
    b.delete_thread("t")
    assert b.get_tuple(cfg("t")) is None
    put(b, "t", "second conversation")
    tup = a.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"v": "second conversation"}


@pytest.mark.parametrize("again", ["new-run", "copy"])
def test_a_warm_saver_continues_a_thread_id_deleted_and_started_again_elsewhere(
    inproc_backend: Backend, again: str
) -> None:
    """Container A stored a 40 KB value in t; B deleted t and started it again; the
    next message reaches warm A, which reads B's checkpoint and stores the value again."""
    value = os.urandom(40_000)
    a, b = inproc_backend.saver(), inproc_backend.saver()
    put(a, "t", value)
    b.delete_thread("t")
    if again == "new-run":
        assert b.get_tuple(cfg("t")) is None
        put(b, "t", "hello again")
    else:
        put(b, "src", "hello again")
        b.copy_thread("src", "t")
    tup = a.get_tuple(cfg("t"))
    assert tup is not None
    config = put(a, "t", value, tup.config)
    got = inproc_backend.saver().get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_values"] == {"v": value}
