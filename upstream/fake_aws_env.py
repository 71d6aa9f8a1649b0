"""The AWS environment the harness's plugins run in: moto's fake credentials, one
region, and nothing that could send a request to a real AWS account."""

from __future__ import annotations

import os


def use_fake_aws() -> None:
    """Set fake credentials and a region; drop profile and endpoint overrides."""
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    for var in (
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ):
        os.environ.pop(var, None)
