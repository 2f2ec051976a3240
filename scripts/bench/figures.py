"""A workload's numbers, from what it measured: the summary dict summary.md, results.json and a
rebuild are made of. Every figure taken from the tuner's JSON is optional (older tuners wrote
fewer keys): absent, it is None, and the report prints "-".

The rules, each a pure function tested on its own:
- best: the config with the best median of the final round (fewer workers on a tie);
- cheapest within 2%: of the configs whose median is within TIE of the best, the one with the
  fewest workers, then kept workers before non-persistent ones (BENCHMARK.md: persistent_workers
  is not cheaper to drop when a run has several epochs), then the least peak host memory;
- stability: three picks read within TIE of each other when the lowest of their medians in one
  round is at least (1 - TIE) of the highest (one config picked three times trivially is).
"""

from __future__ import annotations

import math

from autoloader.search.paired import Ratio, compared, paired_ratio
from autoloader.search.results import OK
from autoloader.search.space import LoaderConfig
from autoloader.store.result import TuneResult
from scripts.bench.common import TIE, median, ratio, short


def best_of(medians: dict[LoaderConfig, float]) -> LoaderConfig | None:
    return max(medians, key=lambda c: (medians[c], -c.num_workers)) if medians else None


def cheapest_within(medians: dict[LoaderConfig, float], peaks: dict[LoaderConfig, int | None],
                    tie: float = TIE) -> LoaderConfig | None:
    """The cheapest config whose median is within ``tie`` of the best (see the module's rules)."""
    best = best_of(medians)
    if best is None:
        return None
    within = [c for c in medians if medians[c] >= medians[best] * (1 - tie)]
    return min(within, key=lambda c: (c.num_workers, 0 if c.persistent_workers or c.num_workers == 0 else 1,
                                      peaks.get(c) or math.inf, c.prefetch_factor or 0, -medians[c]))


def stability_verdict(picks: list[LoaderConfig | None], medians: dict[LoaderConfig, float],
                      tie: float = TIE, wanted: int = 3) -> dict:
    """Whether ``wanted`` picks read within ``tie`` of each other in one round. ``within`` is
    None when it cannot be said (a tune failed or was not run, or a pick has no median)."""
    rates = [medians.get(p) if p is not None else None for p in picks]
    out = {"picks": [short(p) for p in picks], "pick_rates": rates, "same_config": None, "spread": None,
           "within_tie": None, "note": None}
    if len(picks) < wanted or any(p is None for p in picks):
        out["note"] = f"{sum(p is not None for p in picks)} of {wanted} tunes gave a pick"
        return out
    out["same_config"] = len(set(picks)) == 1
    if any(r is None for r in rates):
        out["note"] = "a pick has no median in the round"
        return out
    out["spread"] = 1 - min(rates) / max(rates)
    out["within_tie"] = min(rates) >= max(rates) * (1 - tie)
    return out


def _peak(results) -> int | None:
    return max([r.peak_host_bytes or 0 for r in results] or [0]) or None


def summarise(b) -> dict:
    """The summary of harness.Workload ``b`` (or one rebuilt from records: parts.py)."""
    medians = {c: median([r.samples_per_s for r in rs if r.status == OK])
               for c, rs in b.final.items() if any(r.status == OK for r in rs)}
    peaks = {c: _peak(rs) for c, rs in b.final.items()}
    oracle = best_of(medians)
    oracle_rate = medians.get(oracle) if oracle else None
    pick_rate = medians.get(b.pick) if b.pick else None
    nw0_rate = medians.get(b.base(0))
    heur_rate = medians.get(b.heuristic())
    tuner = TuneResult.from_dict(b.tuner) if b.tuner else None
    estimate = tuner.samples_per_s if tuner else None
    within = [c for c in medians if oracle_rate and medians[c] >= oracle_rate * (1 - TIE)]
    if b.pick is None or pick_rate is None:
        fewest = None
    else:
        fewest = b.pick in within and b.pick.num_workers == min(c.num_workers for c in within)
    cheapest = cheapest_within(medians, peaks) if b.with_grid else None
    ceiling = b.ceiling["ceiling_samples_per_s"] if b.ceiling else None
    spreads = {}
    for c, rs in b.final.items():
        rates = [r.samples_per_s for r in rs if r.status == OK]
        if len(rates) > 1 and medians.get(c):
            spreads[c] = (max(rates) - min(rates)) / medians[c]
    # Paired by round (the same minute of machine state), so the noise the best's max rides on shows.
    per_round = []
    if b.pick in b.final and oracle in b.final:
        for mine, best in zip(b.final[b.pick], b.final[oracle]):
            if mine.status == OK and best.status == OK and best.samples_per_s:
                per_round.append(mine.samples_per_s / best.samples_per_s)
    # The pick over the rule in the bench's own interleaved final, paired by round (NOTE [ Paired
    # rounds ] in autoloader/search/paired.py): the interval the tuner's own claim is held to.
    bench_rule = None
    if b.pick in b.final and b.heuristic() in b.final and b.pick != b.heuristic():
        bench_rule = paired_ratio([(m.samples_per_s, h.samples_per_s) for m, h in zip(b.final[b.pick],
                                   b.final[b.heuristic()]) if m.status == OK and h.status == OK])
    tuner_rule = tuner.rule_ratio if tuner else None
    # The grid's best, chosen on the grid's long windows and scored on the final: a best the
    # final's noise did not pick, so its ratio is free of the max-of-medians bias.
    grid_best = next((c for c, roles in b.final_roles.items() if "grid#1" in roles), None)
    profile_s = tuner.profile.seconds if tuner and tuner.profile else None
    inside = (tuner.tune_seconds if tuner else None) or b.tuner_wall
    predicted = tuner.predicted.samples_per_s if tuner and tuner.predicted else None
    stability = None
    if b.tunes > 1:
        picks = [r["pick"] for r in b.stability_runs] + [None] * (b.tunes - len(b.stability_runs))
        stability = dict(stability_verdict(picks, medians, wanted=b.tunes),
                         tune_seconds=[r["wall_s"] for r in b.stability_runs],
                         errors=[r["error"] for r in b.stability_runs if r["error"]])
        if b.stability_note:
            stability["note"] = "; ".join(n for n in (stability["note"], b.stability_note) if n)
    return {
        "workload": b.name, "batch_size": b.bs, "dataset_length": getattr(b, "length", None),
        "interrupted": b.interrupted, "stability_only": not b.with_grid,
        "tuned_over_oracle": ratio(pick_rate, oracle_rate),
        "tuned_over_grid_best": ratio(pick_rate, medians.get(grid_best)) if grid_best else None,
        "tuned_over_oracle_by_round": per_round,
        "tune_seconds": b.tuner_wall,
        "tune_seconds_inside": tuner.tune_seconds if tuner else None,
        "tuner_rule_ratio": tuner_rule.to_dict() if tuner_rule else None,
        "tuner_verdict": tuner.verdict if tuner else None,
        "bench_rule_ratio": bench_rule.to_dict() if bench_rule else None,
        "tuner_final_rounds": max((len(f.rates) for f in tuner.finals), default=0) if tuner else None,
        "profile_seconds": profile_s,
        "profile_share": profile_s / inside if profile_s is not None and inside else None,
        "predicted_rate": predicted,
        "predicted_over_measured": ratio(predicted, pick_rate),
        "burst_error": (estimate / pick_rate - 1) if estimate and pick_rate else None,
        "vs_torch_default": ratio(oracle_rate, nw0_rate), "vs_heuristic": ratio(pick_rate, heur_rate),
        "ceiling": ceiling, "tuned_over_ceiling": ratio(pick_rate, ceiling),
        "cap": (b.ceiling.get("cap") or b.ceiling.get("bound")) if b.ceiling else None,
        "peak_host_bytes": peaks.get(b.pick) if b.pick in b.final else None,
        "pick_workers": b.pick.num_workers if b.pick else None,
        "pick_fewest_workers_within_tie": fewest,
        "cheapest_within_tie": None if cheapest is None else {
            "config": cheapest.loader_kwargs(), "short": short(cheapest), "workers": cheapest.num_workers,
            "peak_host_bytes": peaks.get(cheapest), "median": medians.get(cheapest), "is_pick": cheapest == b.pick},
        "pick": b.pick.loader_kwargs() if b.pick else None, "pick_short": short(b.pick),
        "pick_rate": pick_rate, "tuner_estimate": estimate, "tuner_error": b.tuner_error,
        "tuner_trials": len(tuner.trials) if tuner else None,
        "oracle": oracle.loader_kwargs() if oracle else None, "oracle_short": short(oracle),
        "oracle_rate": oracle_rate, "nw0_rate": nw0_rate, "heuristic": b.heuristic().loader_kwargs(),
        "heuristic_rate": heur_rate,
        "stability": stability,
        "estimate_s": b.estimate_s, "estimate_after_grid_s": b.estimate_after_grid_s,
        "final": [{"config": c.loader_kwargs(), "short": short(c), "roles": b.final_roles.get(c, []),
                   "rates": [r.samples_per_s for r in rs if r.status == OK],
                   "failed": [f"{r.status}:{r.cause}" for r in rs if r.status != OK],
                   "median": medians.get(c), "spread": spreads.get(c),
                   "peak_host_bytes": peaks.get(c),
                   "wait": median([r.wait_fraction for r in rs if r.status == OK and r.wait_fraction is not None]),
                   "gpu_util": median([r.gpu_util for r in rs if r.status == OK and r.gpu_util is not None])}
                  for c, rs in b.final.items()],
        "grid": [{"config": t.config.loader_kwargs(), "short": short(t.config), "status": t.status,
                  "cause": t.cause, "samples_per_s": t.samples_per_s, "rel_interval": t.rel_interval,
                  "window_s": t.window_s, "seconds": t.seconds} for t in b.grid],
        "grid_skipped": [short(c) for c in b.skipped],
        "ceiling_detail": b.ceiling, "ceiling_facts": b.ceiling_facts, "ceiling_error": b.ceiling_error,
        "phase_seconds": b.phase_s,
        "trial_seconds": {
            "grid_median": median([t.seconds for t in b.grid if t.seconds]),
            "final_median": median([r.seconds for rs in b.final.values() for r in rs if r.seconds])},
    }


def rule_words(stored: dict | None) -> str:
    """A stored pick/rule ratio (``Ratio.to_dict``) in the words its interval supports."""
    if not stored:
        return "-"
    lo, hi = stored["interval"] or (None, None)
    return compared(Ratio(stored["ratio"], lo, hi, stored["rounds"]), "the rule")
