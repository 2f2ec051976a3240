"""The pure decisions: what to measure next, what a measurement means, who wins.

Serves ``tuning.run`` (which sequences them) and the probe and store (which carry their records).
Nothing here imports torch, starts a process or touches a file (a test checks it), so every
decision can be replayed on recorded runs from records alone. The records: ``settings`` (the
knobs, ``knob`` their form), ``space``, ``results``, ``profile``, ``config``; the prediction:
``model`` (its simulation and calibration), ``memory``, ``growth``, ``methods``, ``threads``,
``uint8``; the search: ``strategy``, ``model_first``, ``warm``, ``budget``, ``burst_rule``;
the final: ``opening``, ``paired``, ``choice``, ``knee``; the machine and the stream: ``load``,
``shards``; ``nodes``: a torchdata.nodes graph's; ``policy``: every threshold, a line each on
why; ``codec``: the stored records' one reader and writer.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["budget", "burst_rule", "choice", "codec", "config", "growth", "knee", "knob", "load", "memory", "methods",
           "model", "model_first", "nodes", "opening", "paired", "policy", "profile", "results", "settings", "shards",
           "space", "strategy", "threads", "uint8", "warm"]
