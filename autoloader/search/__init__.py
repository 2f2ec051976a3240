"""The pure decisions: what to measure next, what a measurement means, who wins.

Serves ``tuning.run`` (which sequences them) and the probe and store (which carry their records).
Nothing here imports torch, starts a process or touches a file (a test checks it), so every
decision can be replayed on recorded runs from records alone. The records: ``settings`` (the knobs
and their form), ``space``, ``results`` (with the machine's load), ``profile`` (with the main
process's threads and uint8's costs), ``config`` (with the knee); the prediction: ``model`` (its
simulation and calibration), ``memory``, ``growth``, ``methods``; the search: ``model_first`` (the
strategy it implements, and the warm start), ``budget``; the final: ``paired``, ``choice`` (its
opening round too); the stream: ``shards``; ``nodes``: a torchdata.nodes graph's; ``policy``: every
threshold, a line each on why, and a burst's stop rule; ``codec``: the stored records' one reader
and writer.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["budget", "choice", "codec", "config", "growth", "memory", "methods", "model", "model_first", "nodes",
           "paired", "policy", "profile", "results", "settings", "shards", "space"]
