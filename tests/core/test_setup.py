"""Flow tests of ``core.setup``: bucket, table, wait until active, TTL."""

from __future__ import annotations

from langgraph_s3.core import schema, setup
from langgraph_s3.core.index import CreateTable, EnableTtl, TableStatus
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import CreateBucket, Sleep
from tests.core.canned import make_core
from tests.core.script import Script


def test_setup_creates_the_bucket_and_table_waits_for_it_and_enables_ttl() -> None:
    script = Script(setup.setup(make_core(), region="eu-west-1"))
    script.expect(CreateBucket("eu-west-1"))
    create = script.expect(CreateTable("t"), True)
    assert create.method == "create_table" and create.params["TableName"] == "t"
    assert "ResourceInUseException" in create.expect
    script.expect(TableStatus("t"), "CREATING")
    script.expect(Sleep(1.0))
    script.expect(TableStatus("t"), "ACTIVE")
    ttl = script.expect(EnableTtl("t"))
    assert ttl.method == "update_time_to_live"
    assert ttl.params["TimeToLiveSpecification"] == {
        "Enabled": True,
        "AttributeName": schema.EXPIRES_AT,
    }
    script.returns()


def test_setup_of_an_existing_table_leaves_its_ttl_alone() -> None:
    script = Script(setup.setup(make_core(), region=None))
    script.expect(CreateBucket(None))
    create = script.pending
    script.expect(CreateTable("t"), create.refused("ResourceInUseException", {}))
    script.expect(TableStatus("t"), "ACTIVE")
    script.returns()


def test_setup_gives_up_on_a_table_that_never_becomes_active() -> None:
    """After two minutes of CREATING, setup() says so instead of enabling TTL on a
    table that is not ready."""
    script = Script(setup.setup(make_core(), region=None))
    script.expect(CreateBucket(None))
    script.expect(CreateTable("t"), True)
    for _ in range(setup._ACTIVE_WAIT):
        script.expect(TableStatus("t"), "CREATING")
        script.expect(Sleep(1.0))
    error = script.raises(S3SaverError)
    assert "still CREATING" in str(error) and "'t'" in str(error)
