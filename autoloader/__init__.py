"""autoloader: measure DataLoader settings on the real machine and hand back the fastest.

The public API: ``tune``, ``best_loader`` and ``stored_result`` (api.py), the records they
return (``TuneResult``, ``TunedConfig``, ``LoaderConfig``, ``TrialResult``), the seeded
``worker_init_fn`` (``seed_worker``, ``worker_generator``), the errors and the warnings.
"""

from .api import TuneResult, best_loader, stored_result, tune
from .errors import (
           AutoloaderError,
           AutoloaderWarning,
           NoFeasibleConfig,
           NotSaved,
           UsageError,
)
from .search.config import TunedConfig
from .search.results import TrialResult
from .search.space import LoaderConfig
from .seeding import seed_worker, worker_generator

__all__ = ["AutoloaderError", "AutoloaderWarning", "LoaderConfig", "NoFeasibleConfig", "NotSaved", "TrialResult",
           "TuneResult", "TunedConfig", "UsageError", "best_loader", "seed_worker", "stored_result", "tune",
           "worker_generator"]
