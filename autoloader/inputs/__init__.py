"""What the user asks and the machine offers, checked once before anything runs.

Every input check lives here, and raises a UsageError that states the rule, the value received
and the fix.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["code_digest", "content", "hardware", "home", "loader_args", "options", "problem", "source"]
