"""Probing one config, away from the caller's process, for ``tuning.run``, ``node.runner`` and the
benchmark. The caller never initialises CUDA; the trial process does all the measuring (NOTE
[ Trial processes ] in trial.py), speaking NOTE [ Trial protocol ] (protocol.py) with the driver:

- ``driver``: ``TrialRunner``, the caller's handle on the trial process: start, measure, close,
  when a long wait says what it waits for (start-up here, a node's ranks in node/wire.py), and
  ``tune()``/``best_loader()`` refused in a process re-running the caller's script;
- ``guard``, ``load``: the driver's watch on the trial's tree (memory, /dev/shm, kills, leaks), and
  what other processes take of the CPUs over a span;
- ``serve``, ``trial``, ``workers``: the trial process's entry point and loop, its work (the dataset,
  the step, each trial, its GPU), and its DataLoader workers (their death with it, their end, their
  memory);
- ``burst``, ``profiler``: one config's measurement, and the profile of the pipeline's parts;
- ``failures``: how a failed trial is named.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["driver", "load", "pages", "protocol", "timing", "workers"]
