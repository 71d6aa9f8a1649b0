"""The package's logger: DEBUG logs every request, WARNING conflicts, retries and skew."""

from __future__ import annotations

import logging

log = logging.getLogger("langgraph_s3")
# A library stays quiet until the application configures logging: without a handler,
# Python's last-resort handler would print every WARNING to stderr.
log.addHandler(logging.NullHandler())
