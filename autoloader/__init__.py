"""autoloader: measure DataLoader settings on the real machine and hand back the fastest."""

from .changes import Change, Comparison
from .config import TunedConfig
from .errors import AutoloaderError, NoFeasibleConfig, UsageError
from .knee import Knee, find_knee
from .results import TrialResult
from .seeding import seed_worker, worker_generator
from .space import LoaderConfig, SearchSpace
from .tuner import TuneResult, best_loader, stored_result, tune

__all__ = ["AutoloaderError", "Change", "Comparison", "Knee", "LoaderConfig", "NoFeasibleConfig", "SearchSpace", "TrialResult",
           "TuneResult", "TunedConfig", "UsageError", "best_loader", "find_knee", "seed_worker",
           "stored_result", "tune", "worker_generator"]
