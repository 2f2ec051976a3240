"""One tuning run, from the checked inputs to the stored result.

Serves ``api`` (``tune``/``best_loader``) and ``fleet.retune``:

- ``run``: ``Run``, the sequence (start the trial process, profile, search, final, choose,
  record), each step its own method;
- ``result``: ``TuneResult``, what a run returns and stores (defined in store/result.py, beside
  its readers);
- ``compare``: what changed since the previous result (``--fail-if-changed`` and ``retune``);
- ``progress``: the progress lines and the final table, the only place a run's words are made.
"""
