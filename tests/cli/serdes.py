"""Serializers for ``--serde`` in the command-line tests (importable by the console
script's process): LangGraph's EncryptedSerializer with AES, under two keys."""

from __future__ import annotations

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

KEY = b"0123456789abcdef0123456789abcdef"


def encrypted() -> EncryptedSerializer:
    """The serializer the test threads are written with (a factory, as --serde allows)."""
    return EncryptedSerializer.from_pycryptodome_aes(key=KEY)


#: The same serializer under another key: intact values it cannot decrypt.
other_key = EncryptedSerializer.from_pycryptodome_aes(key=b"x" * 32)
