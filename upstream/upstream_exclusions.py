"""Upstream tests the harness leaves out or runs again, each with the reason and the evidence.

A test may be listed only when it cannot pass reliably for a reason outside the saver
(for example a timing assertion that also fails with InMemorySaver under load, shown
by repeated runs). Never a test that fails with CheckpointConflictError or a wrong
value.
"""

#: Tests not run at all (node id -> reason and evidence).
EXCLUDED: dict[str, str] = {}

#: Test modules upstream's own code skips in the harness's environment (path -> reason
#: and evidence). The harness sets ``NO_DOCKER`` (no service containers), and a module
#: that skips itself on it is reported by pytest as "1 skipped". Listed here so that a
#: skip is never silent: the plugin fails the run on any collection skip not listed.
SKIPPED_MODULES: dict[str, str] = {
    "tests/test_remote_graph.py": (
        "Skips itself when NO_DOCKER is set (module-level pytest.skip): it tests "
        "RemoteGraph against a LangGraph API server in Docker. It takes neither the "
        "sync_checkpointer nor the async_checkpointer fixture (its one local graph is "
        "compiled with InMemorySaver()), so with Docker it would still select no test of "
        "ours. Checked in langgraph 1.2.24's sdist: `grep -c _checkpointer "
        "tests/test_remote_graph.py` is 0."
    ),
}

#: How many times a test in ``RACES`` is run again after a failure. It passes only
#: if one run passes in full, its values included; a saver that gets them wrong fails
#: every run.
RACE_RERUNS = 2

#: Tests that race concurrent tasks against a timer and assert the order they finish
#: in (test function -> reason and evidence). Run again on failure (``RACE_RERUNS``),
#: never left out: everything else they assert must hold.
RACES: dict[str, str] = {
    "tests/test_pregel_async.py::test_imp_nested": (
        "Asserts that task mapper(0) streams its result before mapper(1), which sleeps "
        "10 ms, streams submapper(1): the whole of mapper(0) (its own run, submapper(0) "
        "in a worker thread, and whatever the checkpointer does on the event loop "
        "meanwhile) must fit in 10 ms. On a loaded machine it sometimes does not, for "
        "any saver. Failed once in CI (stop 34, AsyncS3Saver with encryption=, "
        "[memory-sync]). Evidence (2026-11-26, 2 cores with 4 busy loops beside, the "
        "test's 3 durability modes repeated, -n 0): upstream's InMemorySaver lost the "
        "race in 2 of 1,200 runs (4 of 1,200 with 6 busy loops), its AsyncSqliteSaver "
        "in 1 of 900, AsyncS3Saver in 11 of 1,200 (plain) and 44 of 1,500 (sealed): it "
        "does more on the loop, and the moto server answering it shares the two cores. "
        "Every run that lost it passed when run again; none lost it 3 times running."
    ),
}
