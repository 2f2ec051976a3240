"""Many runs, and what they left: the CLI's ``retune``, each run from where it left off, with its
markdown report of what drifted (``registry``: the TOML file of datasets a machine re-tunes each
night), ``show`` (the stored results, listed or one in full) and ``dashboard``
(optuna-dashboard over the studies).
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["dashboard", "registry", "retune", "show"]
