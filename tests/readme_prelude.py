"""The cap on budgets put before each of the README's Python blocks (tests/readme_blocks.py's
CAP), so a block's tune takes seconds, not its README budget. Nothing else: every block runs as
printed.
"""

from __future__ import annotations

import functools

# A snippet's tune measures at most this long (its README budget is meant for real data).
BUDGET_CAP_S = 20.0


def cap_budgets(seconds: float = BUDGET_CAP_S) -> None:
    """``tune`` and ``best_loader``, as the snippet imports them (from ``autoloader`` or through a
    framework helper, which calls ``autoloader.api.best_loader``), with ``budget`` at most
    ``seconds``."""
    import autoloader
    from autoloader import api

    def capped(fn):
        @functools.wraps(fn)
        def call(*args, budget: float = seconds, **kwargs):
            return fn(*args, budget=min(budget, seconds), **kwargs)
        return call

    for name in ("tune", "best_loader"):
        wrapped = capped(getattr(api, name))
        setattr(api, name, wrapped)
        setattr(autoloader, name, wrapped)
