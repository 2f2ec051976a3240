"""Probing one config, away from the driver's process:

- ``driver``: ``TrialRunner``, the driver's handle on the trial process: start, measure, close.
- ``protocol``: the set-up and the messages between the driver and the trial process.
- ``trial``: the trial process itself: builds the dataset and the step, runs each trial.
- ``device``: the trial's GPU helpers: batches to the device, cache release, NVML utilisation.
- ``burst``: the measurement of one config, run inside the trial process.
- ``failures``: how a failed trial is named, from its exception or its process's death.
- ``guard``: the driver's watch on the trial's process tree: memory, /dev/shm, kills, leaks.
"""
