"""A step for the report's end-to-end test, imported by name in the trial process."""

from __future__ import annotations

import time

STEP_S = 0.05


def sleepy_step(batch) -> None:
    """A training step that takes STEP_S a batch and no CPU (a GPU step's wait, on a CPU-only
    machine): any loader config keeps it fed, so the run is held by the step."""
    time.sleep(STEP_S)
