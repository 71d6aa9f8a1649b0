"""Requests that create and describe the table (``setup()``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_s3.core.schema import EXPIRES_AT, GSI_RUN, PK, RUN, SK
from langgraph_s3.immutable import immutable
from langgraph_s3.operations import IndexRequest


@immutable
class CreateTable(IndexRequest[bool]):
    """Create the table ``setup()`` uses. Result: False if it existed already."""

    table: str
    expect = frozenset({"ResourceInUseException"})

    def call(self) -> tuple[str, dict[str, Any]]:
        # infra/storage.yaml declares the same table.
        return "create_table", {
            "TableName": self.table,
            "AttributeDefinitions": [
                {"AttributeName": PK, "AttributeType": "S"},
                {"AttributeName": SK, "AttributeType": "S"},
                {"AttributeName": RUN, "AttributeType": "S"},
            ],
            "KeySchema": [
                {"AttributeName": PK, "KeyType": "HASH"},
                {"AttributeName": SK, "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": GSI_RUN,
                    "KeySchema": [
                        {"AttributeName": RUN, "KeyType": "HASH"},
                        {"AttributeName": SK, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }

    def result(self, response: Mapping[str, Any]) -> bool:
        return True

    def refused(self, code: str, response: Mapping[str, Any]) -> bool:
        return False


@immutable
class TableStatus(IndexRequest[str]):
    """DescribeTable. Result: the table's status (``CREATING``, ``ACTIVE``, ...)."""

    table: str

    def call(self) -> tuple[str, dict[str, Any]]:
        return "describe_table", {"TableName": self.table}

    def result(self, response: Mapping[str, Any]) -> str:
        return str(response["Table"]["TableStatus"])


@immutable
class EnableTtl(IndexRequest[None]):
    """Turn on the table's time-to-live attribute. Result: None."""

    table: str

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_time_to_live", {
            "TableName": self.table,
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": EXPIRES_AT},
        }

    def result(self, response: Mapping[str, Any]) -> None:
        return None
