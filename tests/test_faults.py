"""The fault-injection suite's quick profile (issue 12), in CI.

Every sampled AWS call of a realistic graph's run (see tests/faults/graph.py) is failed
once — refused before the server, or executed with its response lost — with botocore
retries on and off, and the thread is resumed by a fresh saver (the process died) or
by the same one (a warm Lambda container), on S3Saver (moto in-process) and on
AsyncS3Saver (moto server). Then: throttling, racing resumes, damaged storage and
``kill -9``. Clock skew is covered by tests/test_clock_skew.py. The full profile
(every call, every fault) is ``python -m tests.faults --profile full``; its figures
are in docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.faults.sweep import PROFILES, run


def test_quick_fault_profile(moto_server: str, record_property: Callable[[str, Any], None]) -> None:
    figures = run(PROFILES["quick"], server_url=moto_server)
    s = figures["sweep"]
    record_property(
        "faults",
        {
            "injected": s["faults_injected"],
            "resumed": s["resumed"],
            "absorbed": s["absorbed_by_retries"],
            "identical": s["identical_final_state"],
            "torn": s["torn"],
            "forks": s["forks"],
            "lost_writes": s["lost_writes"],
            "double_side_effects_sync": s["double_side_effects_sync"],
        },
    )
    assert figures["same_reference"], "S3Saver and AsyncS3Saver ended in different states"

    # The sweep: every planned case injected its fault, and every invariant held.
    assert s["cases"] == s["planned"] and s["faults_injected"] == s["cases"], s
    assert s["resumed"] > 0 and s["absorbed_by_retries"] > 0, s
    assert not s["failed"], "\n".join(s["failed"])
    assert s["identical_final_state"] == s["faults_injected"]
    assert (s["torn"], s["forks"], s["lost_writes"]) == (0, 0, 0)
    assert (s["double_side_effects_sync"], s["missing_side_effects"]) == (0, 0)

    # Throttling: every thread completes with the clean run's state.
    t = figures["throttle"]
    assert t["throttled"] > 0 and not t["errors"], t
    assert t["completed"] == t["identical"] == t["threads"] and t["bad"] == 0, t

    # N resumes of one interrupted thread at once: one commit, one side effect.
    for race in (figures["race_sync"], figures["race_async"]):
        assert race["commits"] == 1 and race["refused"] == race["racers"] - 1, race
        assert race["side_effects"] == 1 and race["forks"] == 0 and race["identical"], race
        assert not race["other_errors"], race

    # Damaged storage of every kind: a typed error naming the key, never a wrong value.
    for d in figures["damage"]:
        assert not d["problems"], d
        if d["kind"] == "missing-head":  # the head only guards commits; a missing one
            assert d["resume"] == "completed", d  # is recreated by the next commit
        else:
            expected = "MissingObjectError" if d["kind"] == "missing-blob" else "CorruptObjectError"
            assert d["resume"] == expected, d
            assert d["kind"] == "head" or d["refused_reads"] > 0, d

    # kill -9 at seeded calls, then a fresh saver resumes.
    k = figures["kill9"]
    assert k["runs"] == k["killed"] == k["identical"] == PROFILES["quick"].kills, k
    assert not k["bad"], k
