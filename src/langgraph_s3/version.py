"""The package version (the one place it is written; pyproject.toml reads it)."""

__version__ = "0.12.0"

#: Appended to the User-Agent of the clients the savers create, so that requests made
#: through langgraph-s3 can be told apart in AWS-side metrics and logs.
USER_AGENT = f"langgraph-s3/{__version__}"
