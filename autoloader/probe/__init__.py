"""Probing one config, away from the caller's process.

Serves ``tuning.run`` and ``node.runner`` (which ask a ``TrialRunner`` for a profile and for one
measurement at a time) and the benchmark. The caller's process never initialises CUDA; the trial
process does all the measuring (NOTE [ Trial processes ] in trial.py), and the two speak the
protocol of NOTE [ Trial protocol ] in protocol.py:

- ``driver``: ``TrialRunner``, the caller's handle on the trial process: start, measure, close;
- ``startup``: the driver's wait for the trial process's start-up, clipped to the budget and reported;
- ``reimport``: ``tune()``/``best_loader()`` refused in a process re-running the caller's script ('spawn');
- ``waiting``: when a long wait says what it waits for (start-up here, a node's ranks in node/wire.py);
- ``load``: what other processes take of the CPUs over a span (a trial, a run, best_loader's look before reuse);
- ``protocol``: the set-up and the typed messages between the driver and the trial process;
- ``serve``: the trial process's entry point: its set-up, then the loop serving the driver's requests;
- ``trial``: the trial process's work: builds the dataset and the step, runs each trial;
- ``workers``: the trial process's DataLoader workers: their death with it, their end, their memory;
- ``burst``: the measurement of one config, run inside the trial process;
- ``profiler``: the profile of the pipeline's parts, run inside the trial process;
- ``device``: the trial's GPU helpers: batches to the device, cache release, NVML utilisation;
- ``failures``: how a failed trial is named, from its exception or its process's death;
- ``guard``: the driver's watch on the trial's process tree: memory, /dev/shm, kills, leaks.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["driver", "load", "pages", "protocol", "reimport", "timing", "waiting", "workers"]
