"""What a tuning run returns and stores: ``TuneResult``, whose home is store/result.py.

The record is defined beside the store that reads it back (``store.door.load_result``, the
history, a run's mark), below the tuning run that makes it, so that reading a stored result never
imports the run; it is named here too, as what a run returns.
"""

from ..store.result import TuneResult

__all__ = ["TuneResult"]
