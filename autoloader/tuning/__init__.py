"""One tuning run, from the checked inputs to the stored result (``Run``, run.py), for ``api``
and ``fleet.retune``. A run reports through the typed events of autoloader/events.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["compare", "measured", "progress", "run"]
