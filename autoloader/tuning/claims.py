"""A run's what-ifs as its result stores them: predicted beside measured, and how sure.

The explanation (explain/whatif.py) asks the model about each change and says how sure each
answer is (``whatif.how_sure``), which ``store.records.WhatIfClaim`` holds; the run stores them with its result.
"""

from __future__ import annotations

import warnings

from ..errors import AutoloaderWarning
from ..store.records import WhatIfClaim


def what_if_claims(result) -> tuple[WhatIfClaim, ...]:
    """Every what-if of ``result`` (a TuneResult with a measured profile; none without: the model
    has no curve to predict a change from). The pick is saved whatever happens here: an
    explanation that fails is said, and the result stored without it."""
    if getattr(result, "profile", None) is None or result.partial or not getattr(result.profile, "measured", True):
        return ()
    from ..explain import Evidence, how_sure, whatifs

    try:
        ev = Evidence.from_result(result)
        return tuple(WhatIfClaim(w.name, w.title, w.rate * ev.ranks, w.gain, **how_sure(ev, w)) for w in whatifs(ev))
    except Exception as exc:  # noqa: BLE001 - the search is done; its pick must not be lost to the what-ifs
        warnings.warn(AutoloaderWarning(f"the what-ifs could not be worked out ({type(exc).__name__}: {exc}); "
                                        "the result is saved without them"), stacklevel=2)
        return ()
