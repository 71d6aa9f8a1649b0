"""The README's complete examples, run verbatim against a local moto server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def complete_examples() -> list[str]:
    """The python blocks of the README section "A complete example", in order."""
    text = README.read_text()
    section = text.split("### A complete example", 1)[1].split("\n## ", 1)[0]
    section = section.split("\n### ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_section_holds_the_sync_and_async_examples() -> None:
    blocks = complete_examples()
    assert len(blocks) == 2
    assert "S3Saver(" in blocks[0] and "AsyncS3Saver(" in blocks[1]


def example_env(endpoint: str) -> dict[str, str]:
    """The environment the examples run in: a local endpoint, test credentials."""
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env.pop("AWS_PROFILE", None)
    return env


@pytest.mark.parametrize("which", [0, 1], ids=["sync", "async"])
def test_readme_example_runs_verbatim(moto_server: str, which: int) -> None:
    env = example_env(moto_server)
    done = subprocess.run(
        [sys.executable, "-c", complete_examples()[which]],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "waiting for: ('approve',)",
        "log: ['refund 30 EUR: approved']",
    ]
