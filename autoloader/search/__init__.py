"""The pure decisions: what to measure next, what a measurement means, who wins.

Serves ``tuning.run`` (which sequences them) and the probe and store (which carry their records).
Nothing here imports torch, starts a process or touches a file (a test checks it), so every
decision can be reasoned about, and replayed on recorded runs, from records alone:

- ``settings``: the table of knobs, each DataLoader setting declared once (``knob``: what a
  declaration says); ``space``: the DataLoader configs over them and the search space;
  ``results``: what a trial measured; ``profile``: what the profile measured of the pipeline's parts;
- ``model`` and ``calibration``: any config's rate predicted from the profile, corrected by the
  bursts;
- ``strategy`` (the interface), ``model_first`` (the search), ``warm`` (a re-tune's warm start):
  the next config to measure, chosen apart from running it;
- ``choice``: the interleaved final's winner; ``paired``: a ratio's interval from paired rounds;
  ``opening``: the search's bursts that open the final as its first round;
  ``knee``: the worker curve's inflection;
  ``budget``: the run's clock; ``memory``: a config's predicted memory and the limits it must meet;
  ``burst_rule``: a burst's stop rule; ``config``: the tuned config handed back; ``methods``: the
  worker start methods' figures and the result's words on them; ``uint8``: uint8 batches in place
  of float32, as the profile timed the change;
- ``policy``: every threshold a decision uses, a line each on why; ``codec``: the stored records'
  one reader and writer (each record declared once, its fields checked as they are read);
- ``nodes``: a torchdata.nodes graph's own settings, its rule, its space and its snippet.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["budget", "burst_rule", "choice", "codec", "config", "growth", "knee", "knob", "load", "memory", "methods",
           "model", "model_first", "nodes", "opening", "paired", "policy", "profile", "results", "settings", "shards",
           "space", "strategy", "threads", "uint8", "warm"]
