"""Data written by released versions of langgraph-s3, and what later code must do with it."""
