"""Turn the runners' JSON into ``results/results.md``, ``results.json`` and PNG plots.

Run by ``bench/run.py`` in ``bench/.venv`` (matplotlib lives there only). Prints
the main table and the PASS/FAIL of every target; exits 3 when a target fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import prices
import report_extras
from catalog import AWS, LABELS, PROJECT, SAVERS, VARIANTS, latency_text

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RAW = RESULTS / "raw"

WORKLOADS = {
    "a": "(a) approval: interrupt, resume from a new saver",
    "b": "(b) chat, one thread",
    "c": "(c) fan-out, 10 Send branches",
    "d": "(d) 5 MB document, ~1% edited per step",
    "e": "(e) cold resume of the chat thread, new process",
    "f": "(f) small-state tool agent, new saver per invocation",
}
SHORT = {
    "PutObject": "PUT",
    "GetObject": "GET",
    "ListObjectsV2": "LIST",
    "TransactWriteItems": "TxWrite",
    "UpdateItem": "Update",
    "Query": "Query",
    "PutItem": "PutItem",
    "GetItem": "GetItem",
    "BatchWriteItem": "BatchWrite",
    "BatchGetItem": "BatchGet",
    "DeleteItem": "Delete",
    "HeadBucket": "HEAD bucket",
    "HeadObject": "HEAD",
}
COLORS = {
    "s3": "#1f77b4",
    "async": "#17becf",
    "dynamodb": "#d62728",
    "memory": "#7f7f7f",
    "sqlite": "#bcbd22",
}


def load() -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any], dict[str, Any]]:
    runs = {}
    for path in RAW.glob("*-*.json"):
        workload, saver = path.stem.split("-", 1)
        runs[(workload, saver)] = json.loads(path.read_text())
    imports = (
        json.loads((RAW / "imports.json").read_text()) if (RAW / "imports.json").exists() else {}
    )
    meta = json.loads((RAW / "meta.json").read_text()) if (RAW / "meta.json").exists() else {}
    return runs, imports, meta


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def kinds_text(kinds: dict[str, int]) -> str:
    s3 = [f"{SHORT.get(k.split(':')[1], k)} {v}" for k, v in kinds.items() if k.startswith("s3:")]
    ddb = [f"{SHORT.get(k.split(':')[1], k)} {v}" for k, v in kinds.items() if k.startswith("dyn")]
    parts = []
    if s3:
        parts.append("S3: " + ", ".join(s3))
    if ddb:
        parts.append("DDB: " + ", ".join(ddb))
    return "; ".join(parts) or "-"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


class Report:
    def __init__(self) -> None:
        self.runs, self.imports, self.meta = load()
        #: The S3 price table of this run (``run.py --storage-class``).
        self.storage_class: str = self.meta.get("storage_class", "standard")
        self.lines: list[str] = []
        self.targets: list[tuple[str, bool, str]] = []
        self.summary: dict[str, Any] = {"targets": [], "rows": []}

    def failed_runs(self) -> None:
        failures = sorted(RAW.glob("*.failed.txt"))
        if not failures:
            return
        self.lines += [
            "## Failed runs",
            "",
            "These runs did not finish; their figures are missing above and every target "
            "that needs them fails. The full stderr (with every thread's stack when the "
            "watchdog fired) is in `results/raw/`.",
            "",
            "| run | what happened |",
            "|---|---|",
        ]
        for path in failures:
            workload, saver = path.name[: -len(".failed.txt")].split("-", 1)
            what = summarize_failure(path.read_text())
            self.lines.append(f"| ({workload}) {LABELS.get(saver, saver)} | {what} |")
        self.lines.append("")

    def missing(self, workload: str, saver: str) -> bool:
        return (RAW / f"{workload}-{saver}.failed.txt").exists()

    def run(self, workload: str, saver: str) -> dict[str, Any] | None:
        return self.runs.get((workload, saver))

    def total(self, workload: str, saver: str) -> dict[str, Any] | None:
        run = self.run(workload, saver)
        return None if run is None else run["phases"]["total"]

    @staticmethod
    def _index_per_call(total: dict[str, Any], method: str) -> float:
        """Most DynamoDB index requests one call of ``method`` made (results written
        before layout 5 have no ``index_per_call``: every DynamoDB request counted)."""
        row = total.get("methods", {}).get(method, {})
        return float(row.get("index_per_call", row.get("ddb_per_call", {})).get("max", 0))

    def cost(self, workload: str, saver: str) -> dict[str, float] | None:
        run = self.run(workload, saver)
        if run is None or saver not in (*AWS, *VARIANTS):
            return None
        stored = run.get("storage_added", run["storage"])
        return prices.per_million_supersteps(run["phases"]["total"], stored, self.storage_class)

    def profile_note(self) -> str:
        """The line under every table whose figures depend on the prices or the latency."""
        m = self.meta
        latency = latency_text(m.get("latency_ms", 15.0), m.get("latency_profile", "uniform"))
        return (
            f"Profile: {prices.CLASS_LABELS[self.storage_class]} prices (`--storage-class "
            f"{self.storage_class}`); latency {latency}."
        )

    # ------------------------------------------------------------ sections
    def header(self) -> None:
        m = self.meta
        profile = m.get("latency_profile", "uniform")
        flag = f" --storage-class {self.storage_class}" if self.storage_class != "standard" else ""
        # --storage-class express implies --latency-profile express.
        implied = "express" if self.storage_class == "express" else "uniform"
        flag += f" --latency-profile {profile}" if profile != implied else ""
        if m.get("latency_ms", 15.0) != 15.0:
            flag += f" --latency-ms {m['latency_ms']:g}"
        self.lines += [
            "# langgraph-s3 benchmark results",
            "",
            f"Run {m.get('date', '?')}, {'quick' if m.get('quick') else 'full'} mode, "
            f"latency {latency_text(m.get('latency_ms', 15.0), profile)}, one local moto "
            f"server for all savers, S3 prices of "
            f"{prices.CLASS_LABELS[self.storage_class]}, {m.get('cpus', '?')} CPUs (shared). "
            "Whole run: "
            f"{m.get('runtime_s', 0):.0f} s. Command: `python3 bench/run.py"
            f"{' --quick' if m.get('quick') else ''}{flag}`. Library measured: commit "
            f"{m.get('git', '?')}.",
            "",
            "A superstep is one `put` (one checkpoint). Wall times include moto's own "
            "service time; AWS request counts are taken at the wire (`before-send`). "
            "Costs are per million supersteps: requests plus one month of storage for what "
            "those supersteps stored (price table below).",
            "",
        ]

    def main_table(self) -> None:
        self.lines += [
            "## Results by workload",
            "",
            self.profile_note(),
            "",
            "| workload | saver | supersteps | AWS requests | per step | by kind | seq. round "
            f"trips | wall s | ms/step | bytes stored | $ per M steps "
            f"({prices.CLASS_LABELS[self.storage_class]}) | peak RSS MB |",
            "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for workload, title in WORKLOADS.items():
            for saver in (*SAVERS, *VARIANTS):
                run = self.run(workload, saver)
                if run is None:
                    continue
                t = run["phases"]["total"]
                steps = max(1, t["supersteps"])
                cost = self.cost(workload, saver)
                cost_text = f"${cost['total']:.2f}" if cost else "-"
                stored = (
                    run["storage_added"]["bytes"]
                    if "storage_added" in run
                    else (run["storage"]["bytes"])
                )
                row = {
                    "workload": workload,
                    "saver": LABELS[saver],
                    "supersteps": t["supersteps"],
                    "requests": t["requests"],
                    "round_trips": t["round_trips"],
                    "wall_s": t["wall_s"],
                    "stored_bytes": stored,
                    "cost_per_million": cost["total"] if cost else None,
                    "peak_rss_mb": run["peak_rss_mb"],
                }
                self.summary["rows"].append(row)
                self.lines.append(
                    f"| {title} | {LABELS[saver]} | {t['supersteps']} | {t['requests']} | "
                    f"{t['requests'] / steps:.2f} | {kinds_text(t['kinds'])} | "
                    f"{t['round_trips']} | {t['wall_s']:.2f} | {1000 * t['wall_s'] / steps:.1f} | "
                    f"{human_bytes(stored)} | {cost_text} | "
                    f"{run['peak_rss_mb']:.0f} |"
                )
        retried = sum(
            run["phases"]["total"].get("retried", 0)
            for run in self.runs.values()
            if "phases" in run
        )
        self.lines += [
            "",
            f"Requests retried by botocore in this run: {retried} (moto serves one request "
            "at a time, so there should be none).",
            "",
        ]

    def methods_table(self) -> None:
        self.lines += [
            "## Requests per checkpointer call (all graph workloads)",
            "",
            "Mean (max) per call, over every call the graphs made in workloads (a)-(f); "
            "`list` from the probe below (a 30-checkpoint thread, `limit=10`, new saver).",
            "",
            "| saver | put: requests | put: round trips | put_writes: requests | "
            "put_writes: round trips | get_tuple: requests | get_tuple: round trips | "
            "list(limit=10): requests | list: round trips |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for saver in ("s3", "async", "dynamodb"):
            agg: dict[str, dict[str, float]] = {}
            for workload in WORKLOADS:
                t = self.total(workload, saver)
                if t is None:
                    continue
                for method, m in t["methods"].items():
                    a = agg.setdefault(
                        method, {"calls": 0, "req": 0.0, "rtt": 0.0, "req_max": 0, "rtt_max": 0}
                    )
                    a["calls"] += m["calls"]
                    a["req"] += m["requests"]["mean"] * m["calls"]
                    a["rtt"] += m["round_trips"]["mean"] * m["calls"]
                    a["req_max"] = max(a["req_max"], m["requests"]["max"])
                    a["rtt_max"] = max(a["rtt_max"], m["round_trips"]["max"])

            def cell(method: str, what: str, agg: dict[str, dict[str, float]] = agg) -> str:
                a = agg.get(method)
                if not a or not a["calls"]:
                    return "-"
                return f"{a[what] / a['calls']:.2f} ({a[what + '_max']:.0f})"

            probe = self.run("probes", saver)
            lst = probe["probes"]["list"]["limit_10"] if probe else None
            self.lines.append(
                f"| {LABELS[saver]} | {cell('put', 'req')} | {cell('put', 'rtt')} | "
                f"{cell('put_writes', 'req')} | {cell('put_writes', 'rtt')} | "
                f"{cell('get_tuple', 'req')} | {cell('get_tuple', 'rtt')} | "
                f"{lst['requests'] if lst else '-'} | {lst['round_trips'] if lst else '-'} |"
            )
        self.lines.append("")

    def wall_table(self) -> None:
        self.lines += [
            "## Where the wall time goes",
            "",
            "`latency` = sequential round trips x the injected latency; `moto` = moto's own "
            "service time on that sequential chain (moto is much slower than DynamoDB at "
            "expression updates and multi-item queries, and its speed is not AWS's); `rest` = "
            "client CPU (serialization, compression, LangGraph) and everything off the chain. "
            "`without moto` = wall - moto: the wall time if every request took exactly the "
            "injected latency.",
            "",
            self.profile_note(),
            "",
            "| workload | saver | wall s | latency s | moto s | rest s | without moto s |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for workload in WORKLOADS:
            for saver in ("s3", "async", "dynamodb"):
                t = self.total(workload, saver)
                if t is None:
                    continue
                rest = t["wall_s"] - t["latency_s"] - t["chain_service_s"]
                self.lines.append(
                    f"| ({workload}) | {LABELS[saver]} | {t['wall_s']:.2f} | "
                    f"{t['latency_s']:.2f} | {t['chain_service_s']:.2f} | {rest:.2f} | "
                    f"{t['wall_s'] - t['chain_service_s']:.2f} |"
                )
        self.lines.append("")

    def storage_breakdown(self) -> None:
        self.lines += [
            "## What is stored (AWS savers, end of each workload)",
            "",
            "| workload | saver | objects / items: count, bytes | duplicate S3 uploads |",
            "|---|---|---|---:|",
        ]
        for workload in WORKLOADS:
            for saver in ("s3", "async", "dynamodb"):
                run = self.run(workload, saver)
                if run is None:
                    continue
                parts = [
                    f"{name}: {row['count']}, {human_bytes(row['bytes'])}"
                    for name, row in sorted(run["storage"].get("breakdown", {}).items())
                ]
                dup = run["phases"]["total"].get("s3_duplicate_puts", 0)
                self.lines.append(
                    f"| ({workload}) | {LABELS[saver]} | {'; '.join(parts)} | {dup} |"
                )
        self.lines.append("")

    def phases_table(self) -> None:
        self.lines += [
            "## Phases",
            "",
            self.profile_note(),
            "",
            "| workload | phase | saver | requests | by kind | seq. round trips | wall s | "
            "bytes received |",
            "|---|---|---|---:|---|---:|---:|---:|",
        ]
        for workload, names in (
            ("a", ("until_interrupt", "resume")),
            ("d", ("load", "edit")),
            ("e", ("cold_load", "next_turn")),
            ("f", ("first_turn", "resume", "second_turn")),
        ):
            for name in names:
                for saver in (*SAVERS, *VARIANTS):
                    run = self.run(workload, saver)
                    if run is None or name not in run["phases"]:
                        continue
                    p = run["phases"][name]
                    self.lines.append(
                        f"| ({workload}) | {name} | {LABELS[saver]} | {p['requests']} | "
                        f"{kinds_text(p['kinds'])} | {p['round_trips']} | {p['wall_s']:.2f} | "
                        f"{human_bytes(p['bytes_in'])} |"
                    )
        self.lines.append("")

    def growth_section(self) -> None:
        self.lines += ["## Bytes stored as the chat grows (b)", ""]
        header = "| turns |"
        sep = "|---:|"
        series = {}
        for saver in SAVERS:
            run = self.run("b", saver)
            if run is not None:
                series[saver] = run["growth"]
                header += f" {LABELS[saver]} |"
                sep += "---:|"
        if not series:
            return
        self.lines += [header, sep]
        turns = [t for t, _ in next(iter(series.values()))]
        for i, turn in enumerate(turns):
            if i % max(1, len(turns) // 10) and i != len(turns) - 1:
                continue
            row = f"| {turn} |"
            for saver in series:
                row += f" {human_bytes(series[saver][i][1])} |"
            self.lines.append(row)
        self.lines += [
            "",
            "Bytes added per turn, by quarter of the conversation:",
            "",
            "| saver | " + " | ".join(f"Q{q}" for q in range(1, 5)) + " |",
            "|---|---:|---:|---:|---:|",
        ]
        for saver, growth in series.items():
            self.lines.append(
                f"| {LABELS[saver]} | "
                + " | ".join(human_bytes(x) for x in quarter_slopes(growth))
                + " |"
            )
        self.lines.append("")

    def document_section(self) -> None:
        self.lines += [
            "## Document edits (d)",
            "",
            "| saver | stored after load | stored after edits | bytes per edit step | "
            "document zstd-3 / gzip-6 |",
            "|---|---:|---:|---:|---:|",
        ]
        for saver in SAVERS:
            run = self.run("d", saver)
            if run is None:
                continue
            d = run["document"]
            comp = d["compressed"]
            zstd = comp.get("zstd3")
            self.lines.append(
                f"| {LABELS[saver]} | {human_bytes(d['stored_after_load'])} | "
                f"{human_bytes(d['stored_after_edits'])} | "
                f"{human_bytes(d['bytes_per_edit_step'])} | "
                f"{human_bytes(zstd) if zstd else '-'} / {human_bytes(comp['gzip6'])} |"
            )
        self.lines.append("")

    def agent_section(self) -> None:
        """(f): what one invocation costs, and which requests its cost is made of."""
        if not any(self.run("f", s) for s in SAVERS):
            return
        self.lines += [
            "## Small-state tool agent (f)",
            "",
            "Every invocation is a new saver (as on Lambda): per thread a first user turn "
            "that runs tool rounds until the approval's `interrupt()`, its resume, and a "
            "second user turn. Per invocation: mean (min-max).",
            "",
            self.profile_note(),
            "",
            "| saver | invocation | count | supersteps | requests | seq. round trips |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for saver in SAVERS:
            run = self.run("f", saver)
            if run is None:
                continue
            for name in ("first_turn", "resume", "second_turn"):
                rows = [r for r in run["invocations"] if r["phase"] == name]
                cells = []
                for key in ("supersteps", "requests", "round_trips"):
                    xs = [r[key] for r in rows]
                    cells.append(f"{sum(xs) / len(xs):.1f} ({min(xs)}-{max(xs)})")
                self.lines.append(
                    f"| {LABELS[saver]} | {name} | {len(rows)} | {' | '.join(cells)} |"
                )
        self.lines += [
            "",
            "Where the cost per million supersteps goes (AWS savers): DynamoDB write and read "
            "units by request kind, S3 requests by kind (and, for S3 Express One Zone, its "
            "per-GB upload and retrieval charges), and one month of storage.",
            "",
            "| saver | part | requests | units | $ per M supersteps |",
            "|---|---|---:|---:|---:|",
        ]
        table = prices.table(self.storage_class)
        for saver in (*AWS, *VARIANTS):
            run, cost = self.run("f", saver), self.cost("f", saver)
            if run is None or cost is None:
                continue
            t = run["phases"]["total"]
            steps = max(1, t["supersteps"])
            for kind, row in t["per_kind"].items():
                service, op = kind.split(":", 1)
                if service == "s3":
                    per_1k = table["s3_put_per_1k" if op in prices.S3_TIER1 else "s3_get_per_1k"]
                    dollars = 0.0 if op in prices.S3_FREE else row["n"] * per_1k / 1000
                    units = "-"
                elif service == "kms":
                    dollars = row["n"] * prices.PRICES["kms_per_10k"] / 10_000
                    units = "-"
                else:
                    dollars = (
                        row.get("wru", 0) * table["ddb_wru_per_million"]
                        + row.get("rru", 0) * table["ddb_rru_per_million"]
                    ) / 1e6
                    units = f"{row.get('wru', 0):g} WRU, {row.get('rru', 0):g} RRU"
                self.lines.append(
                    f"| {LABELS[saver]} | {kind} | {row['n']} | {units} | "
                    f"{dollars / steps * 1e6:.2f} |"
                )
            if cost["transfer"]:
                up, down = prices.transfer_bytes(t, prices.EXPRESS_FREE_BYTES_PER_REQUEST)
                self.lines.append(
                    f"| {LABELS[saver]} | S3 per-GB upload / retrieval | - | "
                    f"{human_bytes(up)} / {human_bytes(down)} | {cost['transfer']:.2f} |"
                )
            self.lines.append(
                f"| {LABELS[saver]} | storage, 1 month | - | - | {cost['storage_month']:.2f} |"
            )
            self.lines.append(
                f"| {LABELS[saver]} | **total** | {t['requests']} | {t['wru']:g} WRU, "
                f"{t['rru']:g} RRU | **{cost['total']:.2f}** |"
            )
        self.lines.append("")

    def cost_section(self) -> None:
        self.lines += [
            "## Cost per million supersteps (AWS savers)",
            "",
            self.profile_note(),
            "",
            "| workload | saver | WRU | RRU | S3 PUT-class | S3 GET-class | requests $ (of "
            "which S3 per-GB) | storage $ (1 month) | total $ |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for workload in WORKLOADS:
            for saver in (*AWS, *VARIANTS):
                t = self.total(workload, saver)
                cost = self.cost(workload, saver)
                if t is None or cost is None:
                    continue
                self.lines.append(
                    f"| ({workload}) | {LABELS[saver]} | {t['wru']:.0f} | {t['rru']:.1f} | "
                    f"{t['s3_tier1']} | {t['s3_tier2']} | {cost['requests']:.2f} "
                    f"({cost['transfer']:.2f}) | "
                    f"{cost['storage_month']:.2f} | {cost['total']:.2f} |"
                )
        self.lines += [
            "",
            f"Price table ({prices.CLASS_LABELS[self.storage_class]}, {prices.REGION}, "
            f"compiled {prices.PRICES_DATE}"
            + (
                f", its S3 Express One Zone rows {prices.EXPRESS_DATE}"
                if self.storage_class == "express"
                else ""
            )
            + "; sources in `bench/prices.py` and `bench/README.md`):",
            "",
            prices.table_markdown(self.storage_class),
            "",
        ]

    def probes_section(self) -> None:
        self.lines += ["## Protocol probes", ""]
        rows = [
            "| probe | " + " | ".join(LABELS[s] for s in ("s3", "async", "dynamodb")) + " |",
            "|---|---|---|---|",
        ]
        probes = {
            s: (self.run("probes", s) or {}).get("probes") for s in ("s3", "async", "dynamodb")
        }

        def line(name: str, fn: Any) -> None:
            cells = []
            for s in ("s3", "async", "dynamodb"):
                p = probes.get(s)
                try:
                    cells.append(fn(p) if p else "-")
                except (KeyError, IndexError, TypeError):
                    cells.append("-")
            rows.append(f"| {name} | " + " | ".join(cells) + " |")

        line(
            "constructing a saver: requests / ms",
            lambda p: f"{p['construct']['requests']} / {1000 * p['construct']['seconds']:.1f}",
        )
        for i, n in enumerate((1, 4, 16, 64)):
            line(
                f"put_writes with {n} writes: requests (round trips)",
                lambda p, i=i: (
                    f"{p['put_writes'][i]['requests']} ({p['put_writes'][i]['round_trips']})"
                ),
            )
        line(
            "put, only a small channel changed: S3 + DDB requests (round trips)",
            lambda p: ", ".join(
                f"{r['s3']} + {r['ddb']} ({r['round_trips']})"
                for r in p["put_small"]["small_changes"]
            ),
        )
        line(
            "put, 100 KB value edited: S3 + DDB requests (round trips)",
            lambda p: (
                f"{p['put_small']['large_change']['s3']} + "
                f"{p['put_small']['large_change']['ddb']} "
                f"({p['put_small']['large_change']['round_trips']})"
            ),
        )
        for i, n in enumerate((4, 32, 128)):
            line(
                f"get_tuple from a new saver, {n} channels: requests (round trips)",
                lambda p, i=i: f"{p['resume'][i]['requests']} ({p['resume'][i]['round_trips']})",
            )
        line(
            "warm reader, 2nd read after 1 of 2 large values changed: "
            "requests (S3 GETs: new / already seen objects)",
            lambda p: (
                f"{p['warm']['second_read']['requests']} "
                f"({p['warm']['s3_gets_of_new_objects']} / "
                f"{p['warm']['s3_gets_of_seen_objects']}); "
                f"{p['warm']['objects_new']} new objects"
            ),
        )
        line(
            "warm reader, read again with nothing changed: requests (kinds)",
            lambda p: (
                f"{p['warm']['unchanged_read']['requests']} "
                f"({kinds_text(p['warm']['unchanged_read']['kinds'])})"
            ),
        )
        line(
            "list(limit=10) / list() of 30 checkpoints, new saver: requests (round trips)",
            lambda p: (
                f"{p['list']['limit_10']['requests']} "
                f"({p['list']['limit_10']['round_trips']}) / "
                f"{p['list']['all']['requests']} ({p['list']['all']['round_trips']})"
            ),
        )
        self.lines += [*rows, ""]

    def imports_section(self) -> None:
        self.lines += [
            "## Import time (fresh interpreter, median of 7)",
            "",
            "| import | on top of `import langgraph.checkpoint.base, boto3` | baseline itself | "
            "slowest modules it adds (cumulative ms) |",
            "|---|---:|---:|---|",
        ]
        for venv_name in ("main", "aws"):
            for name, row in (self.imports.get(venv_name) or {}).items():
                slow = ", ".join(f"{m} {ms:.0f}" for m, ms in row["slowest"][:3])
                self.lines.append(
                    f"| `{name}` | {row['import_ms']:.1f} ms (min {row['import_ms_min']:.1f}) | "
                    f"{row['baseline_ms']:.0f} ms | {slow} |"
                )
        self.lines.append("")

    # ------------------------------------------------------------ targets
    def target(self, name: str, ok: bool, detail: str) -> None:
        self.targets.append((name, ok, detail))
        self.summary["targets"].append({"target": name, "pass": ok, "detail": detail})

    def evaluate(self) -> None:
        dyn_a = self.total("a", "dynamodb")
        # 1. approval: requests and wall time vs DynamoDBSaver
        if dyn_a:
            parts, ok = [], True
            for s in PROJECT:
                t = self.total("a", s)
                if t is None:
                    ok = False
                    parts.append(f"{LABELS[s]}: no result (the run failed, see Failed runs)")
                    continue
                rq = ratio(t["requests"], dyn_a["requests"])
                wt = ratio(t["wall_s"], dyn_a["wall_s"])
                mt = ratio(
                    t["wall_s"] - t["chain_service_s"], dyn_a["wall_s"] - dyn_a["chain_service_s"]
                )
                rt = ratio(t["round_trips"], dyn_a["round_trips"])
                ok &= rq <= 0.4 and wt <= 0.4
                parts.append(
                    f"{LABELS[s]}: requests {t['requests']} vs {dyn_a['requests']} = {rq:.2f}x, "
                    f"wall {t['wall_s']:.2f} s vs {dyn_a['wall_s']:.2f} s = {wt:.2f}x "
                    f"(without moto's service time {mt:.2f}x; sequential round trips "
                    f"{t['round_trips']} vs {dyn_a['round_trips']} = {rt:.2f}x)"
                )
            self.target(
                "1. (a) requests <= 0.4x and wall time <= 0.4x DynamoDBSaver's",
                ok,
                "; ".join(parts) + self.variant_trade("a"),
            )
        # 2. put_writes, put, resume
        parts, ok = [], True
        for s in PROJECT:
            p = (self.run("probes", s) or {}).get("probes")
            if not p:
                ok = False
                parts.append(f"{LABELS[s]}: no probe result (the run failed, see Failed runs)")
                continue
            pw = [r["requests"] for r in p["put_writes"]]
            # In the graphs, a put_writes whose values are large also uploads them as
            # blobs (S3 PUTs, or chunk items in one BatchWriteItem: layout 5); the
            # index request must still be one.
            graph_pw = max(
                self._index_per_call(self.total(w, s) or {}, "put_writes") for w in WORKLOADS
            )
            small = p["put_small"]["small_changes"]
            s3_max = max(r["s3"] for r in small)
            ddb_max = max(r["ddb"] for r in small)
            resume = [r["round_trips"] for r in p["resume"]]
            graph_resume = []
            for w, ph in (("a", "resume"), ("e", "cold_load")):
                run = self.run(w, s)
                if run and ph in run["phases"]:
                    gt = run["phases"][ph]["methods"].get("get_tuple")
                    if gt:
                        graph_resume.append(gt["round_trips"]["max"])
            ok &= max(pw) == 1 and graph_pw <= 1 and s3_max <= 1 and ddb_max <= 1
            ok &= max(resume + graph_resume) <= 3
            parts.append(
                f"{LABELS[s]}: put_writes requests for 1/4/16/64 writes = "
                f"{'/'.join(map(str, pw))} (graphs: at most {graph_pw:.0f} DynamoDB index "
                f"request per call, chunk-item uploads apart); put with only a small "
                f"change = {s3_max} S3 + {ddb_max} DDB requests; get_tuple round trips for "
                f"4/32/128 channels = {'/'.join(map(str, resume))}, (a) resume / (e) cold load "
                f"= {'/'.join(str(int(x)) for x in graph_resume)}"
            )
        self.target(
            "2. put_writes = 1 request; put <= 1 S3 + 1 DDB request; resume <= 3 round trips",
            ok,
            "; ".join(parts),
        )
        # 3. chat bytes
        dyn_b = self.run("b", "dynamodb")
        if dyn_b:
            parts, ok = [], True
            for s in PROJECT:
                run = self.run("b", s)
                if run is None:
                    ok = False
                    parts.append(f"{LABELS[s]}: no result (the run failed, see Failed runs)")
                    continue
                r = ratio(run["storage"]["bytes"], dyn_b["storage"]["bytes"])
                q = quarter_slopes(run["growth"])
                flat = ratio(q[3], q[1])
                ok &= r <= 0.05 and flat <= 1.5
                parts.append(
                    f"{LABELS[s]}: {human_bytes(run['storage']['bytes'])} vs "
                    f"{human_bytes(dyn_b['storage']['bytes'])} = {r:.3f}x; bytes/turn Q2 "
                    f"{human_bytes(q[1])}, Q4 {human_bytes(q[3])} (Q4/Q2 = {flat:.2f}, flat if "
                    f"<= 1.5)"
                )
            turns = dyn_b["growth"][-1][0]
            self.target(
                f"3. (b) bytes after {turns} turns <= 0.05x DynamoDBSaver's, per-turn growth flat",
                ok,
                "; ".join(parts),
            )
        # 4. document edits
        parts, ok = [], True
        for s in PROJECT:
            run = self.run("d", s)
            if run is None:
                ok = False
                parts.append(f"{LABELS[s]}: no result (the run failed, see Failed runs)")
                continue
            d = run["document"]
            base = d["compressed"].get("zstd3") or d["compressed"]["gzip6"]
            r = ratio(d["bytes_per_edit_step"], base)
            ok &= r <= 0.1
            parts.append(
                f"{LABELS[s]}: {human_bytes(d['bytes_per_edit_step'])} per step vs "
                f"{human_bytes(base)} compressed document = {r:.3f}x"
            )
        dyn_d = self.run("d", "dynamodb")
        if dyn_d:
            parts.append(
                f"(DynamoDBSaver: {human_bytes(dyn_d['document']['bytes_per_edit_step'])} per step)"
            )
        self.target(
            "4. (d) bytes written per step <= 0.1x the compressed document", ok, "; ".join(parts)
        )
        # 5. warm reuse
        parts, ok = [], True
        for s in PROJECT:
            p = (self.run("probes", s) or {}).get("probes")
            if not p:
                ok = False
                parts.append(f"{LABELS[s]}: no probe result (the run failed, see Failed runs)")
                continue
            w = p["warm"]
            again = w["unchanged_read"]["kinds"].get("s3:GetObject", 0)
            ok &= w["s3_gets_of_seen_objects"] == 0 and w["duplicate_gets"] == 0 and again == 0
            parts.append(
                f"{LABELS[s]}: after a change, {w['s3_gets']} GETs = {w['s3_gets_of_new_objects']}"
                f" new objects of {w['objects_new']} new + {w['s3_gets_of_seen_objects']} already "
                f"seen; with nothing changed, {again} GET(s) of the already-read checkpoint object"
            )
        self.target(
            "5. warm reuse: a reader fetches only objects it has not seen", ok, "; ".join(parts)
        )
        # 6. cold start
        main = self.imports.get("main") or {}
        aws = self.imports.get("aws") or {}
        if "langgraph_s3" in main:
            ms = main["langgraph_s3"]["import_ms"]
            construct = [
                ((self.run("probes", s) or {}).get("probes") or {})
                .get("construct", {})
                .get("requests")
                for s in PROJECT
            ]
            ok = ms <= 50 and all(c == 0 for c in construct)
            aws_ms = aws.get("langgraph_checkpoint_aws", {}).get("import_ms")
            self.target(
                "6. import langgraph_s3 <= 50 ms over the baseline; constructing makes no request",
                ok,
                f"import langgraph_s3 +{ms:.1f} ms (AsyncS3Saver +"
                f"{main.get('langgraph_s3.AsyncS3Saver', {}).get('import_ms', float('nan')):.0f} "
                f"ms, aiobotocore), import langgraph_checkpoint_aws +"
                f"{aws_ms if aws_ms is not None else float('nan'):.1f} ms; requests while "
                f"constructing S3Saver/AsyncS3Saver = {construct}",
            )
        # 7. cost
        parts, ok = [], True
        for workload in ("a", "b"):
            dyn = self.cost(workload, "dynamodb")
            if dyn is None:
                continue
            for s in PROJECT:
                c = self.cost(workload, s)
                if c is None:
                    ok = False
                    parts.append(f"({workload}) {LABELS[s]}: no result (the run failed)")
                    continue
                r = ratio(c["total"], dyn["total"])
                rr = ratio(c["requests"], dyn["requests"])
                ok &= r <= 0.3
                parts.append(
                    f"({workload}) {LABELS[s]}: ${c['total']:.2f} vs ${dyn['total']:.2f}"
                    f" = {r:.2f}x (requests alone {rr:.2f}x)"
                )
        self.target(
            "7. cost per million supersteps on (a) and (b) <= 0.3x DynamoDBSaver's",
            ok,
            "; ".join(parts) + self.variant_trade("a"),
        )

    def variant_trade(self, workload: str) -> str:
        """What the non-default configurations measured on a workload: not a verdict."""
        dyn, dyn_cost = self.total(workload, "dynamodb"), self.cost(workload, "dynamodb")
        texts = []
        for v in VARIANTS:
            t, c = self.total(workload, v), self.cost(workload, v)
            if t is None or c is None or dyn is None or dyn_cost is None:
                continue
            dyn_quiet = dyn["wall_s"] - dyn["chain_service_s"]
            texts.append(
                f"{LABELS[v]} (not the default, measured for the trade-off): requests "
                f"{t['requests']} = {ratio(t['requests'], dyn['requests']):.2f}x, wall "
                f"{ratio(t['wall_s'], dyn['wall_s']):.2f}x (without moto's service time "
                f"{ratio(t['wall_s'] - t['chain_service_s'], dyn_quiet):.2f}x)"
                f", sequential round trips "
                f"{t['round_trips']}, cost ${c['total']:.2f} = "
                f"{ratio(c['total'], dyn_cost['total']):.2f}x"
            )
        return "".join(f". {text}" for text in texts)

    def targets_section(self) -> None:
        block = ["## Targets", "", self.profile_note(), ""]
        block += ["| target | result | measured |", "|---|---|---|"]
        block += [f"| {n} | {verdict(ok)} | {d} |" for n, ok, d in self.targets]
        block.append("")
        # Targets go right after the header so they are the first thing read.
        at = self.lines.index("## Results by workload")
        self.lines[at:at] = block

    # ------------------------------------------------------------ plots
    def plots(self) -> list[str]:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return []
        written = []
        # bytes vs turns: linear (the scale of the problem) and log (the small ones)
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        for ax, scale in zip(axes, ("linear", "log"), strict=True):
            for saver in SAVERS:
                run = self.run("b", saver)
                if run is None:
                    continue
                pts = [(t, b / 1024 / 1024) for t, b in run["growth"] if t > 0]
                ax.plot(
                    [t for t, _ in pts],
                    [mb for _, mb in pts],
                    marker="o",
                    ms=3,
                    label=LABELS[saver],
                    color=COLORS[saver],
                )
            ax.set_yscale(scale)
            ax.set_xlabel("chat turns")
            ax.set_ylabel("bytes stored (MB)")
            ax.set_title(f"(b) bytes stored vs turns ({scale} scale)")
            ax.grid(alpha=0.3, which="both")
            ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "bytes_vs_turns.png", dpi=110)
        plt.close(fig)
        written.append("bytes_vs_turns.png")

        # requests and round trips per superstep, per workload
        for fname, key, ylabel, savers in (
            (
                "requests_per_workload.png",
                "requests",
                "AWS requests per superstep",
                ("s3", "async", "dynamodb"),
            ),
            (
                "round_trips_per_workload.png",
                "round_trips",
                "sequential round trips per superstep",
                ("s3", "async", "dynamodb"),
            ),
            ("latency_per_workload.png", "wall_s", "wall ms per superstep (15 ms/request)", SAVERS),
        ):
            fig, ax = plt.subplots(figsize=(9, 5))
            width = 0.8 / len(savers)
            for i, saver in enumerate(savers):
                xs, ys = [], []
                for j, workload in enumerate(WORKLOADS):
                    t = self.total(workload, saver)
                    if t is None:
                        continue
                    value = t[key] / max(1, t["supersteps"])
                    xs.append(j + i * width)
                    ys.append(value * 1000 if key == "wall_s" else value)
                ax.bar(xs, ys, width, label=LABELS[saver], color=COLORS[saver])
            ax.set_xticks([j + width * (len(savers) - 1) / 2 for j in range(len(WORKLOADS))])
            ax.set_xticklabels([f"({w})" for w in WORKLOADS])
            ax.set_ylabel(ylabel)
            ax.grid(axis="y", alpha=0.3)
            ax.legend()
            fig.tight_layout()
            fig.savefig(RESULTS / fname, dpi=110)
            plt.close(fig)
            written.append(fname)

        # time per chat turn
        fig, ax = plt.subplots(figsize=(8, 5))
        for saver in SAVERS:
            run = self.run("b", saver)
            if run is None or not run.get("turn_seconds"):
                continue
            ys = [s * 1000 for s in run["turn_seconds"]]
            ax.plot(range(1, len(ys) + 1), ys, lw=1, label=LABELS[saver], color=COLORS[saver])
        ax.set_xlabel("chat turn")
        ax.set_ylabel("wall ms per turn (15 ms/request)")
        ax.set_title("(b) time per turn as the thread grows")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "turn_latency.png", dpi=110)
        plt.close(fig)
        written.append("turn_latency.png")
        return written

    def write(self) -> int:
        self.header()
        self.evaluate()
        self.failed_runs()
        self.main_table()
        self.methods_table()
        self.wall_table()
        self.phases_table()
        self.growth_section()
        self.document_section()
        self.storage_breakdown()
        self.agent_section()
        self.cost_section()
        self.probes_section()
        self.imports_section()
        note = self.profile_note()
        self.lines += report_extras.long_section(note, self.storage_class)
        self.lines += report_extras.cold_section(note)
        v2_lines, self.summary["layout_v2"] = report_extras.v2_section(self, human_bytes)
        self.lines += v2_lines
        self.targets_section()
        images = self.plots()
        if images:
            self.lines += ["## Plots", ""] + [f"![{i}]({i})" for i in images] + [""]
        (RESULTS / "results.md").write_text("\n".join(self.lines))
        self.summary["meta"] = self.meta
        (RESULTS / "results.json").write_text(json.dumps(self.summary, indent=1))
        start = self.lines.index("## Results by workload")
        table = next(i for i in range(start, len(self.lines)) if self.lines[i].startswith("|"))
        end = self.lines.index("", table)
        print("\n".join(self.lines[start:end]))
        print()
        for name, ok, detail in self.targets:
            print(f"{'PASS' if ok else 'FAIL'}  {name}\n      {detail}")
        print(f"\nwritten: {RESULTS / 'results.md'}, results.json, {', '.join(images)}")
        return 0 if all(ok for _, ok, _ in self.targets) else 3


def summarize_failure(stderr: str) -> str:
    """One line: the exception, or the frame most threads were stuck in."""
    if "Thread 0x" in stderr or "Current thread" in stderr:
        frames: dict[str, int] = {}
        threads = 0
        for block in stderr.split("\n\n"):
            lines = [ln.strip() for ln in block.strip().splitlines()]
            if not lines or not lines[0].startswith(("Thread", "Current thread")):
                continue
            threads += 1
            mine = [ln for ln in lines[1:] if "langgraph_s3" in ln or "langgraph/" in ln]
            if mine:
                frames[mine[0]] = frames.get(mine[0], 0) + 1
        top = max(frames.items(), key=lambda kv: kv[1]) if frames else ("?", 0)
        return f"hung; watchdog dumped {threads} threads, {top[1]} of them waiting at `{top[0]}`"
    tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"`{tail[-1][:200]}`" if tail else "no output"


def quarter_slopes(growth: list[list[int]]) -> list[float]:
    """Bytes added per turn in each quarter of the turns (from the sampled growth)."""
    last = growth[-1][0]
    out = []
    for q in range(4):
        lo, hi = last * q / 4, last * (q + 1) / 4
        # The samples nearest outside the quarter's bounds (samples are sparse).
        t0, b0 = max(((t, b) for t, b in growth if t <= lo), default=growth[0])
        t1, b1 = min(((t, b) for t, b in growth if t >= hi), default=growth[-1])
        out.append((b1 - b0) / (t1 - t0) if t1 > t0 else float("nan"))
    return out


if __name__ == "__main__":
    sys.exit(Report().write())
