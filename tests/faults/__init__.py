"""Fault-injection suite (issue 12): one realistic graph, every AWS call of its run failed
once in each way, and the invariants the saver promises checked after each recovery.

``tests/storage/test_faults.py`` runs the quick profile in CI; ``python -m tests.faults --profile
full`` runs every case (see docs/reliability.md).
"""
