"""A run's what-ifs as its result stores them: predicted beside measured, and how sure.

The explanation (explain/whatif.py) asks the model about each change; this turns each answer
into a ``store.claims.WhatIfClaim``: a measured gain comes from the final's paired rounds of the
changed config and the pick where the final measured both (with its 95% interval: NOTE [ Paired
rounds ] in search/paired.py), else from separate bursts (a figure, no interval), else the
change is predicted only, with the model's range.
"""

from __future__ import annotations

import warnings

from ..errors import AutoloaderWarning
from ..search.choice import finalist_of, paired
from ..search.paired import signed_span
from ..store.claims import BURSTS, PAIRED, WhatIfClaim


def what_if_claims(result) -> tuple[WhatIfClaim, ...]:
    """Every what-if of ``result`` (a TuneResult with a profile; none without). The pick is saved
    whatever happens here: an explanation that fails is said, and the result stored without it."""
    if getattr(result, "profile", None) is None or result.partial:
        return ()
    from ..explain import Evidence
    from ..explain.whatif import whatifs

    try:
        ev = Evidence.from_result(result)
        return tuple(_claim(ev, w) for w in whatifs(ev))
    except Exception as exc:  # noqa: BLE001 - the search is done; its pick must not be lost to the what-ifs
        warnings.warn(AutoloaderWarning(f"the what-ifs could not be worked out ({type(exc).__name__}: {exc}); "
                                        "the result is saved without them"), stacklevel=2)
        return ()


def _claim(ev, w) -> WhatIfClaim:
    where = w.measured_config or w.config
    ratio = paired(finalist_of(where, ev.finals), finalist_of(ev.pick, ev.finals)) if where != ev.pick else None
    base = dict(name=w.name, change=w.title, predicted_samples_per_s=w.rate * ev.ranks, predicted_gain=w.gain)
    nearby = f" at num_workers={where.num_workers}" if w.measured_config is not None else ""
    if ratio is not None and ratio.judged:
        lo, hi = ratio.lo - 1.0, ratio.hi - 1.0
        return WhatIfClaim(**base, measured_gain=ratio.ratio - 1.0, measured_from=PAIRED, measured_interval=(lo, hi),
                           rounds=ratio.rounds,
                           sure=f"measured{nearby} in {ratio.rounds} paired rounds: {signed_span(lo, hi)}")
    if ratio is not None:
        return WhatIfClaim(**base, measured_gain=ratio.ratio - 1.0, measured_from=PAIRED, rounds=1,
                           sure=f"measured{nearby} in one paired round: not judged")
    if w.measured_gain is not None:
        return WhatIfClaim(**base, measured_gain=w.measured_gain, measured_from=BURSTS,
                           sure=f"measured{nearby} in separate bursts, which share no round: no interval")
    low, high = ev.model.rate_range(w.config, ev.calibration)
    span = (f" (the model's range {signed_span(low / w.base_rate - 1.0, high / w.base_rate - 1.0)})"
            if w.base_rate > 0 else "")
    return WhatIfClaim(**base, sure="predicted, not measured" + span)

