"""In-run readings of a few batches, whatever they take, every step worth its cost, and two
steps at most: for tests whose epochs last milliseconds (tests/test_inrun.py's fixture, the
spawned ranks of tests/test_distributed.py and tests/integration_spawn.py)."""

from __future__ import annotations

from autoloader.inrun import schedule


def short_readings(setattr=setattr, segment_s: float = 0.0) -> None:
    """Set the schedule's constants with ``setattr`` (pytest's ``monkeypatch.setattr`` in a test)."""
    setattr(schedule, "SEGMENT_S", segment_s)
    setattr(schedule, "MIN_STEADY_BATCHES", 4)
    setattr(schedule, "READ_CYCLES", 1)
    setattr(schedule, "START_GUESS_S", 0.0)
    setattr(schedule, "MAX_STEPS", 2)
    setattr(schedule.Plan, "worth", lambda self, config, direction, run_left: True)
