"""``langgraph_s3.server``: the Agent Server's checkpointer factory reads its storage
from ``CHECKPOINT_CONNECTION_STRING`` and says what to set when it cannot.

No request is sent here; the factory behind a running ``langgraph dev`` is tested in
``tests/deploy/test_agent_server.py``, and against moto in
``tests/storage/test_server_factory.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3 import AsyncS3Saver, InvalidConfigError
from langgraph_s3.server import CONNECTION_STRING_VAR, checkpointer, saver_from_env

URL = "s3://my-agents/prod/?table=my-index&region=eu-west-1&endpoint_url=http://127.0.0.1:5000"


@pytest.mark.parametrize("environ", [{}, {CONNECTION_STRING_VAR: "  "}])
def test_a_missing_connection_string_says_what_to_set(environ: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        saver_from_env(environ)
    message = str(caught.value)
    assert message.startswith("CHECKPOINT_CONNECTION_STRING is not set: set it in the server's")
    assert "s3://BUCKET/PREFIX?table=TABLE&region=REGION" in message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("postgres://db/x", "must look like 's3://bucket/optional/prefix?table="),
        ("s3://my-agents/prod", "needs '?table=...'"),
        ("s3://my-agents?table=t&tabel=u", "unknown option 'tabel'"),
    ],
)
def test_a_malformed_connection_string_is_named_and_explained(value: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        saver_from_env({CONNECTION_STRING_VAR: value})
    assert str(caught.value).startswith("CHECKPOINT_CONNECTION_STRING is not valid: ")
    assert says in str(caught.value)
    assert isinstance(caught.value.__cause__, InvalidConfigError)


def test_the_saver_is_built_from_the_string_and_arguments_win() -> None:
    saver = saver_from_env({CONNECTION_STRING_VAR: URL}, compression_level=9)
    assert isinstance(saver, AsyncS3Saver)
    assert (saver.bucket, saver.table, saver.layout.prefix) == ("my-agents", "my-index", "prod/")
    assert (saver.region_name, saver.endpoint_url) == ("eu-west-1", "http://127.0.0.1:5000")
    assert saver.compression_level == 9


async def test_each_entry_of_the_factory_makes_its_own_saver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server enters the factory once per event-loop thread; an AsyncS3Saver
    belongs to one loop, so no two entries may share one."""
    monkeypatch.setenv(CONNECTION_STRING_VAR, URL)
    async with checkpointer() as first, checkpointer() as second:
        assert isinstance(first, AsyncS3Saver)
        assert first is not second


def readme_factory_file() -> str:
    """The README's example of a factory file of one's own (``checkpointer.py``)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Serving with LangGraph's Agent Server", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "saver_from_env" in b]
    assert len(blocks) == 1, "the README's Agent Server section lost its factory file example"
    return blocks[0]


async def test_the_readme_factory_file_makes_a_saver_per_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONNECTION_STRING_VAR, URL)
    namespace: dict[str, Any] = {}
    exec(compile(readme_factory_file(), "checkpointer.py", "exec"), namespace)
    async with namespace["checkpointer"]() as first, namespace["checkpointer"]() as second:
        assert isinstance(first, AsyncS3Saver)
        assert (first.bucket, first.table) == ("my-agents", "my-index")
        assert first is not second
