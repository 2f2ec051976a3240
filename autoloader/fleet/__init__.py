"""Many runs, and what they left: the commands that look across stored results.

Serves the CLI's ``retune``, ``show`` and ``dashboard``:

- ``registry``: the TOML file of datasets a machine re-tunes each night; ``retune``: re-tuning
  them, each from where it left off (``warm``), and ``report``: the markdown report of what drifted;
- ``show``: the stored results, listed or one in full; ``dashboard``: optuna-dashboard over the
  studies.
"""
