"""``python -m tests.faults --profile full [--write-docs] [--max-minutes M]``

Runs the fault sweep, prints its figures as JSON, and with ``--write-docs`` replaces
the figures table of docs/reliability.md (between its markers) with this run's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.faults.sweep import PROFILES, run

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def _pair(sync: Any, async_: Any) -> str:
    return str(sync) if sync == async_ else f"{sync} / {async_}"


def _scenario_rows(figures: dict[str, Any]) -> list[tuple[str, str]]:
    """Throttling, races, damage and kill -9: each saver's figures, S3Saver first."""
    t, ta = figures["throttle"], figures["throttle_async"]
    k, ka = figures["kill9"], figures["kill9_async"]
    rs, ra = figures["race_sync"], figures["race_async"]
    async_resume = {d["kind"]: d["resume"] for d in figures["damage_async"]}
    damaged = ", ".join(f"{d['kind']} → {_pair(d['resume'], async_resume[d['kind']])}"
                        for d in figures["damage"])  # fmt: skip
    damage_problems = sum(len(d["problems"]) for d in figures["damage"])
    damage_problems_async = sum(len(d["problems"]) for d in figures["damage_async"])
    return [
        ("throttling (S3Saver / AsyncS3Saver): threads, attempts throttled",
         f"{t['threads']} / {ta['threads']} threads, {t['throttled']} of {t['attempts']} / "
         f"{ta['throttled']} of {ta['attempts']} attempts; "
         f"{t['identical']} / {ta['identical']} identical final states"),
        ("racing resumes (S3Saver / AsyncS3Saver)",
         f"{rs['racers']} / {ra['racers']} racers: commits {rs['commits']} / {ra['commits']}, "
         f"side effects {rs['side_effects']} / {ra['side_effects']}, "
         f"forks {rs['forks']} / {ra['forks']}"),
        ("damaged storage: resume gives (S3Saver / AsyncS3Saver where they differ)",
         f"{damaged}; wrong values or untyped errors: {damage_problems} / "
         f"{damage_problems_async}"),
        ("`kill -9` at a seeded call, then resume (S3Saver / AsyncS3Saver)",
         f"{k['runs']} / {ka['runs']} runs, {k['killed']} / {ka['killed']} killed, "
         f"{k['identical']} / {ka['identical']} identical, {len(k['bad'])} / {len(ka['bad'])} bad"),
    ]  # fmt: skip


def render(figures: dict[str, Any], limited: bool) -> str:
    """The figures as a Markdown table (what --write-docs puts between the markers)."""
    s = figures["sweep"]
    calls = figures["calls_per_run"]
    memory = figures["memory_mb"]
    e, ea = figures["entries"]["S3Saver"], figures["entries"]["AsyncS3Saver"]
    commit = subprocess.run(
        ["git", "log", "-1", "--format=%h", "--", "src"],
        capture_output=True,
        text=True,
        check=False,
        cwd=DOC.parents[1],
    ).stdout.strip()
    bound = (
        f", bounded by --max-minutes {figures['max_minutes']}" if figures.get("max_minutes") else ""
    )
    rows = [
        ("profile", f"`{figures['profile']}`{bound}, {figures['seconds']} s, "
                    f"library commit {commit}"),
        ("AWS calls in one clean run", f"S3Saver {calls['S3Saver']}, "
                                       f"AsyncS3Saver {calls['AsyncS3Saver']}"),
        ("values named in one clean run's storage (S3Saver / AsyncS3Saver): chunk lists "
         "packed, loose; plain chunk entries",
         ", ".join(_pair(e[k], ea[k]) for k in ("lists_packed", "lists_loose", "chunks"))),
        ("cases run / planned", f"{s['cases']} / {s['planned']}"
                                + (" (stopped at the time bound)" if limited else "")),
        ("faults injected", s["faults_injected"]),
        ("… not injected: the run ended before the call (one PUT fewer than the clean run)",
         s["not_injected"]),
        ("… run raised, thread resumed", s["resumed"]),
        ("… absorbed by botocore's retries", s["absorbed_by_retries"]),
        ("identical final state", f"{s['identical_final_state']} / {s['faults_injected']}"),
        ("torn checkpoints", s["torn"]),
        ("forks", s["forks"]),
        ("lost pending writes", s["lost_writes"]),
        ("double side effects under `durability=\"sync\"`", s["double_side_effects_sync"]),
        ("side-effect node re-runs (same key, deduplicated)", s["side_effect_reruns"]),
        ("writes of checkpoints whose commit failed (harmless)", s["orphan_writes"]),
        ("failed cases", len(s["failed"])),
        *_scenario_rows(figures),
        ("resident memory (MB): every 50 sweep cases; at the end; peak",
         f"{', '.join(map(str, memory['every_50_cases']))}; {memory['end']}; "
         f"{memory['peak']}"),
    ]  # fmt: skip
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def write_docs(table: str) -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="stop starting sweep cases after this long")  # fmt: skip
    args = parser.parse_args(argv)
    deadline = time.time() + args.max_minutes * 60 if args.max_minutes else None
    figures = run(PROFILES[args.profile], deadline=deadline,
                  log=lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    figures["max_minutes"] = args.max_minutes
    print(json.dumps(figures, indent=1, default=str))
    limited = figures["sweep"]["cases"] < figures["sweep"]["planned"]
    if args.write_docs:
        write_docs(render(figures, limited))
    s = figures["sweep"]
    broken = (
        s["failed"]
        or any(figures[k]["bad"] for k in ("kill9", "kill9_async", "throttle", "throttle_async"))
        or any(d["problems"] for d in figures["damage"] + figures["damage_async"])
        or not all(e["lists_packed"] + e["lists_loose"] for e in figures["entries"].values())
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
