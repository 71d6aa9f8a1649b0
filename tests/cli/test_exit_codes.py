"""``exit_code``: the README's exit code for each key error (the console script runs
the missing and refused key cases in test_encrypted_commands.py)."""

from __future__ import annotations

import pytest

from langgraph_s3.cli.common import NOT_OK, STORAGE, USAGE, exit_code
from langgraph_s3.errors import (
    DataKeyError,
    KeyScopeError,
    KeyServiceError,
    KeyUnwrapError,
    KeyVersionError,
    UnknownKeyError,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (KeyServiceError("KMS throttled", key_id="arn"), STORAGE),  # retry
        (KeyScopeError("tenant_of disagrees", key_id="t1"), USAGE),
        (UnknownKeyError("not configured", key_id="arn"), USAGE),
        (DataKeyError("no key item", key_id="t1"), NOT_OK),
        (KeyUnwrapError("refused", key_id="arn"), NOT_OK),
        (KeyVersionError("shredded", key_id="1", thread_id="t1", newer=False), NOT_OK),
    ],
)
def test_key_errors_leave_with_the_readme_exit_code(error: Exception, code: int) -> None:
    assert exit_code(error) == code
