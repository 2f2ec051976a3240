"""One tuning run, from the checked inputs to the stored result.

Serves ``api`` (``tune``/``best_loader``) and ``fleet.retune``:

- ``run``: ``Run``, the sequence (start the trial process, profile, search, final, choose,
  record), each step its own method;
- ``record``: the result's record, assembled from what the run measured and chose, compared with
  the previous result, written;
- ``compare``: what changed since the previous result (``--fail-if-changed`` and ``retune``);
- ``measured``: the record's parts that are plain functions of what was measured (the knee, the
  num_workers=0 baseline, the reorder gain, the fallback profile);
- ``final``: the interleaved final, until its paired rounds settle the pick against the rule;
- ``claims``: the result's what-ifs, predicted beside measured, and how sure; ``start``: the worker
  start method in a run (its gate, what the profile measures, the result's words);
- ``progress``: the progress subscribers (the CLI's printer, the log) and the final table; a run
  reports through the typed events of autoloader/events, whose lines are events/lines.py's.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["compare", "measured", "progress", "run"]
