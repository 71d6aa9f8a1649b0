"""Fault-injection suite (issue 12): one realistic graph, every AWS call of its run failed
once in each way, and the invariants the saver promises checked after each recovery.

The suite stores the graph's document as a chunk list (``env.LIST_MIN``, 8 instead of
the saver's 64, in every process it runs), so every case, kill and damage kind also
covers chunk lists; the sweep checks in a clean run's storage that lists were written.

``tests/storage/test_faults.py`` runs the quick profile in CI; ``python -m tests.faults --profile
full`` runs every case (see docs/reliability.md).
"""
