"""Flow tests of ``core.setup``: bucket, table, wait until active, TTL."""

from __future__ import annotations

from typing import Any

from langgraph_s3.core import schema, setup
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import CreateBucket, Ddb, DdbFailure, Sleep
from tests.core.canned import make_core
from tests.core.script import Script


def described(status: str) -> dict[str, Any]:
    return {"Table": {"TableStatus": status}}


def test_setup_creates_the_bucket_and_table_waits_for_it_and_enables_ttl() -> None:
    script = Script(setup.setup(make_core(), region="eu-west-1"))
    script.expect(CreateBucket("eu-west-1"))
    create = script.expect(Ddb, {})
    assert create.op == "create_table" and create.params == schema.table_definition("t")
    assert "ResourceInUseException" in create.expect
    script.expect(Ddb("describe_table", {"TableName": "t"}), described("CREATING"))
    script.expect(Sleep(1.0))
    script.expect(Ddb("describe_table", {"TableName": "t"}), described("ACTIVE"))
    ttl = script.expect(Ddb, {})
    assert ttl.op == "update_time_to_live"
    assert ttl.params["TimeToLiveSpecification"] == {
        "Enabled": True,
        "AttributeName": schema.EXPIRES_AT,
    }
    script.returns()


def test_setup_of_an_existing_table_leaves_its_ttl_alone() -> None:
    script = Script(setup.setup(make_core(), region=None))
    script.expect(CreateBucket(None))
    script.expect(Ddb, DdbFailure("ResourceInUseException", {}))
    script.expect(Ddb("describe_table", {"TableName": "t"}), described("ACTIVE"))
    script.returns()


def test_setup_gives_up_on_a_table_that_never_becomes_active() -> None:
    """After two minutes of CREATING, setup() says so instead of enabling TTL on a
    table that is not ready."""
    script = Script(setup.setup(make_core(), region=None))
    script.expect(CreateBucket(None))
    script.expect(Ddb, {})
    for _ in range(setup._ACTIVE_WAIT):
        script.expect(Ddb("describe_table", {"TableName": "t"}), described("CREATING"))
        script.expect(Sleep(1.0))
    error = script.raises(S3SaverError)
    assert "still CREATING" in str(error) and "'t'" in str(error)
