"""Client-side encryption's pure core: sealing values to their place (issue 24).

No I/O happens here; the savers will call these functions where they frame, store
and read objects. ``cryptography`` (the ``langgraph-s3[encryption]`` extra) is
imported on first use only.

Theory of operation:

* **Keys.** A :class:`DataKey` (32 random bytes and an id) belongs to one scope: a
  thread, or a tenant. It never encrypts anything itself. HKDF-SHA256 derives two
  subkeys from it, one for sealing and one for naming (distinct ``info`` labels).
* **Sealing.** :func:`seal` encrypts with AES-256-GCM under a key of its own for each
  object: HKDF of the sealing subkey with a random 16-byte salt. A long-lived
  thread or tenant key therefore never reaches GCM's limit of about 2^32 messages
  per key with random 12-byte nonces; each derived key seals one object. The
  stored bytes are::

      b"LGSE"  version (1)  key-id length (1)  key id  salt (16)  nonce (12)  ciphertext+tag (16)

  The associated data is that whole header followed by the canonical encoding of
  the object's *place* (:mod:`.places`): prefix, thread or key scope, kind, and for a
  body its namespace and checkpoint id, for a pending write also its task and write
  index, for a blob its keyed name; then any cleartext the caller keeps beside the
  object (``clear=``, e.g. the references a collector reads without keys), which is
  thereby authenticated too. A sealed value copied anywhere else, a flipped
  bit, a truncation or another data key makes :func:`open_sealed` raise
  :class:`~langgraph_s3.errors.SealedObjectError` naming the object.
* **Names.** :func:`name` is HMAC-SHA256 under the naming subkey: equal chunks get
  equal names within a key's scope (dedupe keeps working) and unrelated names
  across scopes.
* **Wrapping.** A data key is stored wrapped, bound to an encryption context;
  :class:`StaticKeyRing` wraps with keys held in memory (tests, non-AWS use),
  :class:`KmsKeyRing` has AWS KMS generate and unwrap them (:mod:`.kms`: flows that
  yield KMS requests, and a cache of unwrapped keys with a lifetime).

Not covered by sealing: an older authentic object of the *same* place put back
(rollback), and deletions. Those need a trusted counter, not a cipher.
"""

from __future__ import annotations

from langgraph_s3.sealing.cipher import (
    MAGIC,
    SEAL_VERSION,
    DataKey,
    check_name,
    name,
    open_sealed,
    overhead,
    seal,
    sealed_key_id,
)
from langgraph_s3.sealing.kms import KmsKeyRing
from langgraph_s3.sealing.places import (
    BlobPlace,
    BodyPlace,
    Place,
    WritePlace,
    encode_context,
)
from langgraph_s3.sealing.ring import StaticKeyRing

__all__ = [
    "MAGIC",
    "SEAL_VERSION",
    "BlobPlace",
    "BodyPlace",
    "DataKey",
    "KmsKeyRing",
    "Place",
    "StaticKeyRing",
    "WritePlace",
    "check_name",
    "encode_context",
    "name",
    "open_sealed",
    "overhead",
    "seal",
    "sealed_key_id",
]
