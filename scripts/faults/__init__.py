"""Faults injected into real tuning runs: ``datasets`` (the fault datasets, steps and leftover
checks the tests use too) and ``suite`` (``python -m scripts.faults``: every fault class through
the real tuner, written to results/reliability.md)."""
