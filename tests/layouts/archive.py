"""``python -m tests.layouts.archive OUT``: write the archive fixture with the code
installed (``langgraph_s3.archive.export_thread`` of :func:`write_thread`'s thread).

Run it with the release whose archives are to be kept importable, as
``tests.layouts.write`` is run. ``archive_v1.jsonl`` was written by main at ace3d50
(release 0.4.1, layout 4): its values are small blobs, which later layouts store as
chunk items, so importing it with today's code exercises them.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from moto import mock_aws

from langgraph_s3.archive import export_thread
from tests.conftest import Backend

THREAD = "archived"
SUB = "child:1"
#: Values above this many bytes are stored as blobs: a few KB are small blobs.
INLINE = 512


def write_thread(saver: Any, thread: str = THREAD, seed: int = 7) -> None:
    """Four checkpoints in the root namespace and two in ``SUB``, each with a few KB
    value in channel ``v`` and a counter, and pending writes of a few KB values."""
    rand = random.Random(seed)
    for ns, steps in (("", 4), (SUB, 2)):
        parent = None
        for step in range(steps):
            cp = empty_checkpoint()
            version = saver.get_next_version(None, None)
            cp["channel_values"] = {"v": rand.randbytes(1_000 + 1_500 * step), "n": step}
            cp["channel_versions"] = {"v": version, "n": version}
            config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            parent = saver.put(config, cp, {"step": step, "ns": ns}, {"v": version})
            writes = [("v", rand.randbytes(2_000)), ("n", step + 1)]
            saver.put_writes(parent, writes, f"task-{step}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        backend = Backend("inproc", None)
        saver = backend.saver(inline_threshold=INLINE)
        saver.setup()
        write_thread(saver)
        with args.out.open("w") as out:
            done = export_thread(saver, THREAD, out)
    print(f"{args.out}: {done.checkpoints} checkpoints, {done.writes} writes")


if __name__ == "__main__":
    main()
