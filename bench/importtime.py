"""Import cost of each saver package, measured in fresh interpreters (Lambda cold start).

Each sample is a new ``python -c`` process that first imports the baseline every
saver needs anyway (``langgraph.checkpoint.base`` and ``boto3``) and then the
package under test; the figure is the time of the second import alone. The
median of several samples is reported, after one discarded warm-up run that
fills the bytecode caches. ``-X importtime`` names the slowest modules the
package itself adds.

    python bench/importtime.py main   # in bench/.venv: langgraph_s3 (+ AsyncS3Saver)
    python bench/importtime.py aws    # in bench/.venv-aws: langgraph_checkpoint_aws
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BASELINE = "import langgraph.checkpoint.base, boto3"
TARGETS = {
    "main": {
        "langgraph_s3": "import langgraph_s3",
        "langgraph_s3.AsyncS3Saver": "from langgraph_s3 import AsyncS3Saver",
        "langgraph.checkpoint.sqlite": "import langgraph.checkpoint.sqlite",
    },
    "aws": {
        "langgraph_checkpoint_aws": "import langgraph_checkpoint_aws",
        "langgraph_checkpoint_aws.DynamoDBSaver": (
            "from langgraph_checkpoint_aws import DynamoDBSaver"
        ),
    },
}
SAMPLES = 7
# Every package is imported from compiled bytecode, as after `pip install`. The
# editable project has none of its own (and PYTHONDONTWRITEBYTECODE may be set),
# so the caches go to a prefix under bench/ instead of next to the sources.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPYCACHEPREFIX"] = str(
    Path(__file__).resolve().parent / ".pycache" / Path(sys.prefix).name
)
_TIMER = """
import time
t0 = time.perf_counter()
{baseline}
t1 = time.perf_counter()
{target}
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def sample(target: str) -> tuple[float, float]:
    code = _TIMER.format(baseline=BASELINE, target=target)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=ENV
    )
    base, extra = (float(x) for x in out.stdout.split())
    return base, extra


def slowest_modules(target: str, top: int = 8) -> list[tuple[str, float]]:
    """Modules the target imports beyond the baseline, by cumulative time (ms)."""
    code = f"{BASELINE}\nimport sys; sys.stderr.write('--mark--\\n')\n{target}"
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    after = out.stderr.split("--mark--", 1)[1].splitlines()
    rows = []
    for line in after:
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        depth = len(name) - len(name.lstrip())
        if depth <= 2:  # top-level and their direct children
            rows.append((name.strip(), int(cumulative) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main(which: str) -> int:
    result: dict[str, dict[str, object]] = {}
    for name, target in TARGETS[which].items():
        sample(target)  # warm-up: bytecode caches
        samples = [sample(target) for _ in range(SAMPLES)]
        result[name] = {
            "baseline_ms": statistics.median(s[0] for s in samples) * 1000,
            "import_ms": statistics.median(s[1] for s in samples) * 1000,
            "import_ms_min": min(s[1] for s in samples) * 1000,
            "slowest": slowest_modules(target),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
