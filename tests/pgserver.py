"""The fleet tests' PostgreSQL server: scripts/faults/pgserver.py (the fault suite's too)."""

from scripts.faults.pgserver import Server, start  # noqa: F401
