"""``python -m tests.layouts.write OUT [--sealed]``: write the layout fixture with the code
installed.

Run it with the *release* whose layout is to be kept, from this checkout, e.g. for
the layout of the code at commit C::

    git worktree add /tmp/old C
    PYTHONPATH=/tmp/old/src .venv/bin/python -m tests.layouts.write tests/layouts/v1.json.gz

It runs the ``before`` part of every scenario on moto in-process, with prefix
``fx/``, and saves the bucket and the table (``tests/layouts/store.py``). With
``--sealed`` the savers have ``encryption=`` (layout 4): a static key ring whose
key is made up for the fixture and kept in it (``written_by["ring"]``), so that
later code can open what was sealed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
from pathlib import Path
from typing import Any

from moto import mock_aws

import langgraph_s3
from tests.conftest import Backend
from tests.layouts import store
from tests.layouts.scenarios import SCENARIOS

PREFIX = "fx/"
#: The static key ring of a sealed fixture: not a secret, it protects test data.
RING_ID = "fixture-ring"


def saver_options(ring: dict[str, str] | None) -> dict[str, Any]:
    """The saver options a fixture's threads are read with: ``encryption=`` for a
    sealed one (a fresh :class:`Encryption` each time: nothing cached), else none."""
    if ring is None:
        return {}
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    keys = {ring["id"]: bytes.fromhex(ring["key"])}
    return {"encryption": Encryption(StaticKeyRing(keys, current=ring["id"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sealed", action="store_true", help="with encryption= (layout 4)")
    args = parser.parse_args()
    out = args.out
    ring = {"id": RING_ID, "key": os.urandom(32).hex()} if args.sealed else None
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    source = Path(langgraph_s3.__file__).resolve().parents[1]
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    with mock_aws():
        backend = Backend("inproc", None)
        backend.saver(prefix=PREFIX).setup()
        for scenario in SCENARIOS:
            scenario.before(lambda: backend.saver(prefix=PREFIX, **saver_options(ring)))
        data = store.dump(backend)
    data["written_by"] = {
        "version": langgraph_s3.__version__,
        "commit": commit,
        "source": str(source),
        "date": datetime.date.today().isoformat(),
        "prefix": PREFIX,
        "threads": [s.thread for s in SCENARIOS],
    }
    if ring is not None:
        data["written_by"]["ring"] = ring
    store.save(out, data)
    print(f"{out}: {len(data['objects'])} objects, {len(data['items'])} items, by {commit}")


if __name__ == "__main__":
    main()
