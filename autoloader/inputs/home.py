"""The results home: where results are written and looked up unless ``out=``/``--out`` names a folder.

# NOTE [ Results home ]
# A stored result is only useful if the next call finds it, and ``best_loader`` is called from
# wherever the training script runs: a ``results/`` folder under the working directory was a
# new, empty store for every directory. So results live in one per-user cache folder unless
# ``out=``/``--out`` names another: ``$AUTOLOADER_HOME`` when set, else the platform's per-user
# cache folder as platformdirs knows it (``$XDG_CACHE_HOME/autoloader``, ``~/.cache/autoloader``
# on Linux, ``~/Library/Caches/autoloader`` on macOS, ``%LOCALAPPDATA%\\autoloader\\Cache`` on
# Windows). It is a cache: deleting it costs a re-tune, nothing else.
"""

from __future__ import annotations

import os

HOME_ENV = "AUTOLOADER_HOME"


def default_out() -> str:
    """The results home (NOTE [ Results home ])."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    import platformdirs

    return platformdirs.user_cache_dir("autoloader", appauthor=False)


def resolve_out(out: str | None) -> str:
    """``out`` as given, or the results home when it is None."""
    return default_out() if out is None else out
