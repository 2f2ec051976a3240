"""What qualifies a run's figures, in the words the table (tuning/progress.py), the report page,
``show`` and the JSON share: where the pick's rate is from, the rule it replaces, the machine's
load, and "not predicted" where the profile was not measured. Pure.
"""

from __future__ import annotations

from ..errors import clip
from ..events.lines import cpus as _cpus, gib as _gib, others_text, rate as _rate
from ..search.settings import DATALOADER
from ..search.results import OK
from .verdict import beaten_words

# What the table, the page and the JSON say for the model's figure when no profile was measured.
NOT_PREDICTED = ("not predicted: the profile was not measured, so the model has no curve and no knee "
                 "(every figure here is measured)")


def profiled(result) -> bool:
    """Whether the run measured its profile (a stand-in from one batch is not one)."""
    profile = getattr(result, "profile", None)
    return profile is not None and getattr(profile, "measured", True)


def load_lines(load) -> list[str]:
    """What the machine's load (a search.load.MachineLoad) says, in words: NOTE [ Others on the machine ]."""
    if load is None or load.others_cpus is None:
        return []
    steal = f", steal {load.steal_cpus:.2f}" if load.steal_cpus else ""
    lines = [f"{others_text(load.others_cpus, load.usable_cpus)} on average while the run measured{steal}"
             + (f", {load.final_others_cpus:.1f} during the final" if load.final_others_cpus is not None else "")]
    lines += [f"{others_text(span.others_cpus, load.usable_cpus)} during "
              + (f"trial {span.first}" if span.first == span.last else f"trials {span.first}-{span.last}")
              + ": these figures are what the machine gives while they run" for span in load.busy_spans]
    if load.busy:
        widened = (f"the final's ties widened by {load.widen * 100:.0f} points where its rounds disagree; "
                   if load.final_others_cpus is not None else "")
        lines.append(f"a busy machine (others past {load.threshold:.0%} of the CPUs): {widened}a nightly comparison "
                     "of this run is inconclusive, and it is no baseline for the next")
    return lines


# The share of the profile's sample stage spent waiting for a CPU past which the table says so.
PROFILE_WAIT_SAID = 0.05


def profile_load_line(profile) -> str | None:
    """What the others' load did to the profile (NOTE [ A profile read under load ]), where it did."""
    share = getattr(profile, "sample_delay_share", None)
    if share is None or share < PROFILE_WAIT_SAID:
        return None
    others = profile.others_cpus
    took = f" (others took {others:.1f} of {_cpus(profile.cpus)})" if others is not None else ""
    return (f"the profile's samples waited {share:.0%} of their time for a CPU{took}: their costs are read "
            "without the waits, and the model shares the CPUs with the others' demand")


def rate_basis(result) -> str | None:
    """Where the pick's rate is from when no interleaved final measured it; None where the final did."""
    if getattr(result, "partial", False) or any(f.config == result.tuned.config and f.rates
                                                 for f in getattr(result, "finals", ())):
        return None
    return ("from one burst, no final: no interleaved round measured the pick beside another, so its rate has "
            "no paired comparison")


def caveats(result) -> list[tuple[str, str]]:
    """What qualifies the pick's figures, as (label, text) rows."""
    rows = [("samples/s from", basis) for basis in [rate_basis(result)] if basis]
    rows.append((rule_label(result), rule_line(result)))
    said = profile_load_line(getattr(result, "profile", None))
    rows += [("machine load", text) for text in load_lines(getattr(result, "load", None)) + ([said] if said else [])]
    return rows


def rule_label(result) -> str:
    """The rule's row's label: the cpus-1 rule, or a torchdata.nodes graph as it was given."""
    rule = getattr(result, "rule", None)
    return "graph as given" if rule is not None and rule.loader != DATALOADER else "cpus-1 rule"


def _ranked_otherwise(result) -> str:
    """Where the final's own medians put the pick and the rule in the other order than their medians
    over every paired round, which the choice ranks by (NOTE [ The opening round ]): those medians,
    so that a pick shown below the rule's rate says why it was kept."""
    finals = {f.config: f for f in getattr(result, "finals", ())}
    pick, rule = finals.get(result.tuned.config), finals.get(getattr(result, "rule", None))
    if pick is None or rule is None or pick is rule:
        return ""
    if (pick.median < rule.median) == (pick.round_median < rule.round_median):
        return ""
    ranks = getattr(result, "ranks", 1)
    return (f" (over every paired round, the opening's too, which the choice ranks by: the pick "
            f"{_rate(pick.round_median * ranks)}, the rule {_rate(rule.round_median * ranks)})")


def rule_line(result) -> str:
    """The line on the rule the tuner replaces: the verdict its paired rounds support, or why none."""
    rule, tuned = getattr(result, "rule", None), result.tuned
    if rule is None:
        return "not measured: this search holds no rule"
    settings = f"num_workers={rule.num_workers}, pin_memory={rule.pin_memory}, persistent"
    if rule.loader != DATALOADER:   # a torchdata.nodes graph's own settings (search/nodes.py)
        settings = "the graph as given: " + ", ".join(f"{k}={v!r}" for k, v in rule.loader_kwargs().items()
                                                      if k not in ("loader", "batch_size"))
    verdict = getattr(result, "verdict", None) or "the pick is the rule's config"
    if rule == tuned.config:
        return f"{verdict} ({settings}){beaten_words(result)}"
    median = getattr(result, "rule_samples_per_s", None)
    if median:
        return f"{_rate(median)} ({settings}) in the interleaved final; the pick: {verdict}{_ranked_otherwise(result)}"
    trials = [tr for tr in result.trials if tr.config == rule]
    failed = next((tr for tr in trials if tr.status != OK), None)
    if failed is not None:
        return f"could not run here ({settings}): {clip(failed.describe_failure(), 500)}"
    burst = next((tr for tr in trials if tr.status == OK and tr.samples_per_s), None)
    forecast, inputs = getattr(result, "rule_memory", None), getattr(result, "inputs", None)
    ceiling = inputs.max_memory if inputs is not None else None
    if forecast is not None and ceiling and forecast.host_bytes > ceiling:   # kept out of the final: final.py
        seen = f"; its burst read {_rate(burst.samples_per_s)}" if burst is not None else ""
        return (f"the rule's forecast {_gib(forecast.host_bytes)} is past the {_gib(ceiling)} ceiling: not measured "
                f"in the final ({settings}){seen}")
    if burst is not None:
        rough = " (stopped early: a rough figure)" if burst.pruned else ""
        return (f"not in an interleaved final ({settings}): no round of it fit in the budget, so no interval; its burst "
                f"read {_rate(burst.samples_per_s)}{rough}")
    return f"not measured ({settings}): the budget ended before it"
