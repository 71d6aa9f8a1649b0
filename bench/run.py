#!/usr/bin/env python3
"""The langgraph-s3 benchmark suite, in one command (standard library only):

    python3 bench/run.py            # full run (about 10 minutes on 2 cores)
    python3 bench/run.py --quick    # smoke run: fewer turns, threads and steps

What it does:

1. creates two virtual environments next to this file (once; again when their
   requirements change):
   * ``bench/.venv``      this project (editable, with ``async``), moto server,
                          langgraph, langgraph-checkpoint-sqlite, matplotlib;
   * ``bench/.venv-aws``  langgraph-checkpoint-aws, kept apart from this project's
                          dependencies, with the *same* langgraph versions;
2. starts one moto server (S3 + DynamoDB) on 127.0.0.1 and a free port;
3. runs every workload against every saver, each in a fresh subprocess that
   prints its figures as JSON (``bench/runner.py``), plus the protocol probes
   (``bench/probes.py``) and import-time measurements (``bench/importtime.py``);
   (a) and (f) also run with ``S3Saver(index_inline_limit=8192)``, the configuration
   that trades target 7 for target 1; then the long-thread ``list`` runs
   (``bench/longthread.py``) and the cold-start samples (``bench/coldstart.py``);
4. writes ``bench/results/results.md``, ``results.json`` and PNG plots
   (``bench/report.py``) and prints the table and PASS/FAIL per target.

Options: ``--latency-ms`` (default 15), ``--latency-profile aws`` (S3 30 ms,
DynamoDB 5 ms), ``--storage-class express`` (S3 Express One Zone prices, and the
``express`` latency profile unless another is given: S3 5 ms, DynamoDB 5 ms),
``--savers s3,dynamodb``, ``--workloads a,b``, ``--extras long,cold`` (default both;
``none`` skips them), ``--skip-install`` (use the venvs as they are).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

from catalog import AWS, LATENCY_PROFILES, SAVERS, VARIANTS
from prices import STORAGE_CLASSES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
RAW = RESULTS / "raw"

MAIN_VENV = HERE / ".venv"
AWS_VENV = HERE / ".venv-aws"

# Ranges that pip resolves without backtracking: the project's `async` extra pins
# boto3 to aiobotocore's window, and everything else is capped to one minor series.
MAIN_REQUIREMENTS = [
    "-e",
    f"{ROOT}[async]",
    "moto[s3,dynamodb,server]>=5.1,<6",
    "langgraph>=1.2,<1.3",
    "langgraph-checkpoint-sqlite>=3.1,<3.2",
    "matplotlib>=3.8,<4",
]
#: The version of the official saver under test (the newest at the time of writing;
#: it declares langgraph-checkpoint>=3,<5 and langgraph>=1.0, so it runs on the
#: same langgraph 1.2 / langgraph-checkpoint 4.x as the project).
AWS_PACKAGE = "langgraph-checkpoint-aws==1.2.6"
AWS_BOTO3 = "boto3>=1.43.64,<2"
#: Installed in the aws venv at exactly the versions the main venv resolved, so
#: both run the very same LangGraph.
SHARED = ("langgraph", "langgraph-checkpoint", "langchain-core")

WORKLOADS = ("a", "b", "c", "d", "e", "f")
#: Measurements beside the workloads (issue 22): ``long`` = list() on long threads
#: (``longthread.py``, S3Saver and DynamoDBSaver), ``cold`` = fresh-process first
#: get_tuple (``coldstart.py``, S3Saver, AsyncS3Saver and DynamoDBSaver, and with
#: AsyncS3Saver the floor under it: a bare aiobotocore client sending its requests).
EXTRAS = {"long": ("s3", "dynamodb"), "cold": ("s3", "async", "dynamodb")}


def python_of(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin") / "python"


def pip_install(env: Path, requirements: list[str]) -> None:
    """Install into ``env``; pip's chatter is shown only if it fails."""
    if not python_of(env).exists():
        print(f"  creating {env.relative_to(ROOT)}", flush=True)
        venv.EnvBuilder(with_pip=True).create(env)
    proc = subprocess.run(
        [
            str(python_of(env)),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            *requirements,
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"pip install into {env} failed")


def ensure_env(env: Path, requirements: list[str], skip: bool) -> None:
    stamp = env / ".bench-requirements"
    wanted = hashlib.sha256(
        "\n".join(requirements).encode() + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()
    if skip and python_of(env).exists():
        return
    if stamp.exists() and stamp.read_text() == wanted:
        return
    print(f"installing {env.name} ...", flush=True)
    started = time.perf_counter()
    pip_install(env, requirements)
    stamp.write_text(wanted)
    print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)


def installed_versions(env: Path, dists: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m;"
        f"print(json.dumps({{d: m.version(d) for d in {list(dists)!r}}}))"
    )
    out = subprocess.run(
        [str(python_of(env)), "-c", code], capture_output=True, text=True, check=True
    )
    versions: dict[str, str] = json.loads(out.stdout)
    return versions


def setup_envs(skip: bool) -> None:
    ensure_env(MAIN_VENV, MAIN_REQUIREMENTS, skip)
    shared = installed_versions(MAIN_VENV, SHARED)
    aws_requirements = [AWS_PACKAGE, AWS_BOTO3, *(f"{d}=={v}" for d, v in shared.items())]
    ensure_env(AWS_VENV, aws_requirements, skip)


def env_for(saver: str) -> Path:
    return AWS_VENV if saver == "dynamodb" else MAIN_VENV


class MotoServer:
    """The moto server subprocess; stops when its stdin is closed."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(python_of(MAIN_VENV)), str(HERE / "moto_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the moto server did not start")
        self.endpoint: str = json.loads(line)["endpoint"]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_json(
    cmd: list[str], label: str, failure: Path | None = None, timeout: float = 420
) -> dict[str, Any] | None:
    """Run one runner; on failure keep its stderr (stack dump included) in ``failure``."""
    started = time.perf_counter()
    try:
        # runner.py dumps its stacks and exits after 300 s; this is the backstop.
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        print(f"  {label:<28} TIMED OUT", flush=True)
        if failure is not None:
            stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr
            failure.write_text(f"timed out\n{stderr or ''}")
        return None
    took = time.perf_counter() - started
    if proc.returncode != 0:
        print(f"  {label:<28} FAILED after {took:.1f} s (stderr in {failure})", flush=True)
        if failure is not None:
            failure.write_text(proc.stderr)
        return None
    print(f"  {label:<28} {took:6.1f} s", flush=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_extras(extras: list[str], savers: list[str], common: list[str], endpoint: str) -> int:
    """The long-thread runs and the cold-start samples; returns how many failed."""
    failures = 0
    if "long" in extras:
        print("long threads (list on 1,000 and 10,000 checkpoints)", flush=True)
        for saver in [s for s in EXTRAS["long"] if s in savers]:
            cmd = [str(python_of(env_for(saver))), "runner.py", "--saver", saver]
            cmd += ["--workload", "long", "--watchdog", "1500", *common]
            result = run_json(cmd, saver, RAW / f"long-{saver}.failed.txt", timeout=1800)
            if result is None:
                failures += 1
            else:
                (RAW / f"long-{saver}.json").write_text(json.dumps(result))
    cold = [s for s in EXTRAS["cold"] if s in savers]
    if "async" in cold:  # the floor under AsyncS3Saver (coldstart.py), beside it
        cold.insert(cold.index("async") + 1, "aiobotocore")
    if "cold" in extras and cold:
        print("cold start (fresh processes, median of 7)", flush=True)
        latency = common[common.index("--latency-ms") : common.index("--latency-profile") + 2]
        cmd = [str(python_of(MAIN_VENV)), "coldstart.py", "run", "--endpoint", endpoint]
        cmd += ["--savers", ",".join(cold), *latency]
        result = run_json(cmd, ",".join(cold), RAW / "cold-all.failed.txt")
        if result is None:
            failures += 1
        else:
            (RAW / "cold-all.json").write_text(json.dumps(result))
    return failures


def git_state() -> str:
    """The commit measured, and whether the library's sources differed from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (src/ with uncommitted changes)" if dirty else head


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer turns/steps: a smoke run")
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=15.0,
        help="latency injected before every AWS request (default 15)",
    )
    parser.add_argument(
        "--latency-profile",
        default=None,
        choices=sorted(LATENCY_PROFILES),
        help="per-service latency: 'aws' = S3 30 ms, DynamoDB 5 ms; 'express' = S3 5 ms, "
        "DynamoDB 5 ms (default: uniform, or express with --storage-class express)",
    )
    parser.add_argument(
        "--storage-class",
        default="standard",
        choices=STORAGE_CLASSES,
        help="S3 prices: 'standard' (S3 Standard) or 'express' (S3 Express One Zone, "
        "directory bucket; same S3 API on moto). Default standard",
    )
    parser.add_argument("--savers", default=",".join(SAVERS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument(
        "--extras",
        default=",".join(EXTRAS),
        help="long,cold (default both) or none: the long-thread and cold-start measurements",
    )
    parser.add_argument(
        "--skip-install",
        action="store_true",
        help="use bench/.venv and bench/.venv-aws as they are",
    )
    args = parser.parse_args(argv)
    if args.latency_profile is None:
        args.latency_profile = "express" if args.storage_class == "express" else "uniform"
    return args


def run_workloads(workloads: list[str], savers: list[str], common: list[str]) -> int:
    """Every workload (and the probes) against every saver; returns how many failed."""
    failures = 0
    for workload in [*workloads, "probes"]:
        print(f"workload {workload}", flush=True)
        variants = [v for v, on in VARIANTS.items() if "s3" in savers and workload in on]
        for saver in [*savers, *variants]:
            if workload == "e" and saver == "memory":
                continue  # an in-memory thread cannot be resumed by another process
            if workload == "probes" and saver not in AWS:
                continue
            cmd = [str(python_of(env_for(saver))), "runner.py", "--saver", saver]
            cmd += ["--workload", workload, *common]
            result = run_json(cmd, f"{saver}", RAW / f"{workload}-{saver}.failed.txt")
            if result is None:
                failures += 1
                continue
            (RAW / f"{workload}-{saver}.json").write_text(json.dumps(result))
    return failures


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    savers = [s for s in args.savers.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]

    started = time.perf_counter()
    setup_envs(args.skip_install)
    RAW.mkdir(parents=True, exist_ok=True)
    for old in [*RAW.glob("*.json"), *RAW.glob("*.failed.txt")]:
        old.unlink()
    state = RESULTS / "state"
    state.mkdir(parents=True, exist_ok=True)
    for old in state.glob("*.sqlite*"):
        old.unlink()

    print("import time (fresh interpreters) ...", flush=True)
    imports = {
        "main": run_json([str(python_of(MAIN_VENV)), "importtime.py", "main"], "project venv"),
        "aws": run_json([str(python_of(AWS_VENV)), "importtime.py", "aws"], "aws venv"),
    }
    (RAW / "imports.json").write_text(json.dumps(imports, indent=1))

    server = MotoServer()
    print(f"moto server at {server.endpoint}", flush=True)
    try:
        common = ["--endpoint", server.endpoint, "--latency-ms", str(args.latency_ms)]
        common += ["--latency-profile", args.latency_profile, "--state-dir", str(state)]
        if args.quick:
            common.append("--quick")
        failures = run_workloads(workloads, savers, common)
        extras = [x for x in args.extras.split(",") if x in EXTRAS]
        failures += run_extras(extras, savers, common, server.endpoint)
    finally:
        server.stop()

    meta = {
        "git": git_state(),
        "quick": args.quick,
        "latency_ms": args.latency_ms,
        "latency_profile": args.latency_profile,
        "storage_class": args.storage_class,
        "extras": args.extras,
        "runtime_s": time.perf_counter() - started,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
    }
    (RAW / "meta.json").write_text(json.dumps(meta))
    report = subprocess.run([str(python_of(MAIN_VENV)), "report.py"], cwd=HERE)
    print(f"total runtime {time.perf_counter() - started:.0f} s")
    return 1 if failures or report.returncode not in (0, 3) else report.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
