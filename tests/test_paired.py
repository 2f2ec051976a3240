"""Every comparison with its interval (NOTE [ Paired rounds ], NOTE [ Sure enough ] in
search/paired.py): the interval math on known numbers, the words that follow it, the final that
stops once sure, the cheaper kept when unsure, no final between a pick and itself, and the
result's fields."""

from __future__ import annotations

import json
import math
import re

import pytest

from autoloader.search.budget import Clock
from autoloader.search.choice import Finalist, choose, rule_settled, rule_verdict
from autoloader.search.config import TunedConfig
from autoloader.search.paired import Ratio, by_rounds, compared, paired_ratio, t95
from autoloader.search.policy import FINAL_MAX_ROUNDS, FINAL_MIN_ROUNDS
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.search.codec import InvalidRecord
from autoloader.store.records import WhatIfClaim
from autoloader.store.result import TuneResult
from autoloader.tuning.final import Final, final_configs
from autoloader.tuning.progress import table

PICK = LoaderConfig.make(16, 3, False, 2, True)
RULE = LoaderConfig.make(16, 1, False, 2, True)
MORE = LoaderConfig.make(16, 6, False, 2, True)   # costlier than the rule
NONE = LoaderConfig.make(16, 0, False)


# --- the math --------------------------------------------------------------------------------

def test_the_interval_is_the_t_interval_of_the_log_ratios():
    pairs = [(110.0, 100.0), (121.0, 110.0), (105.0, 100.0), (116.0, 100.0)]
    d = [math.log(a / b) for a, b in pairs]
    mean, sd = sum(d) / 4, math.sqrt(sum((x - sum(d) / 4) ** 2 for x in d) / 3)
    r = paired_ratio(pairs)
    assert r.rounds == 4 and r.ratio == pytest.approx(math.exp(mean))
    half = 3.182 * sd / 2   # t(0.975, 3) sd / sqrt(4)
    assert r.lo == pytest.approx(math.exp(mean - half)) and r.hi == pytest.approx(math.exp(mean + half))
    # Known numbers, worked by hand: d = (0.0953, 0.0953, 0.0488, 0.1484), mean 0.0970, sd 0.0407.
    assert (r.ratio, r.lo, r.hi) == pytest.approx((1.1018, 1.0327, 1.1756), abs=5e-4)
    assert r.faster and not r.slower and r.settled()


def test_the_t_quantiles_and_one_round():
    assert t95(1) == 12.706 and t95(4) == 2.776 and t95(30) == 2.042
    assert t95(60) == pytest.approx(2.000, abs=1e-3) and t95(1000) == pytest.approx(1.962, abs=1e-3)
    assert t95(0) == math.inf
    one = paired_ratio([(125.0, 100.0)])
    assert one == Ratio(1.25, None, None, 1) and not one.judged and not one.settled() and one.interval is None
    assert compared(one, "the rule") == "one round against the rule: not judged"
    assert paired_ratio([]) is None and paired_ratio([(0.0, 100.0)]) is None
    assert by_rounds({0: 120.0, 2: 130.0}, {0: 100.0, 1: 90.0, 2: 100.0}).rounds == 2   # only shared rounds


def test_the_issues_two_round_final_is_not_a_claim_of_25_percent():
    # The GPU report that read "1.25x" from 2,955 and 2,751 against 2,485 and 2,081.
    r = paired_ratio([(2955.0, 2485.0), (2751.0, 2081.0)])
    assert r.judged and r.lo < 1.0 < r.hi and not r.settled()
    assert compared(r, "the rule").startswith("indistinguishable from the rule (−")


def test_the_words_follow_the_interval():
    assert compared(Ratio(1.055, 1.03, 1.08, 5), "the rule") == "faster than the rule by 3-8%"
    assert compared(Ratio(1.02, 0.96, 1.09, 5), "the rule") == "indistinguishable from the rule (−4…+9%)"
    assert compared(Ratio(0.95, 0.93, 0.97, 5), "the rule") == "slower than the rule by 3-7%"
    assert compared(Ratio(3.2, 2.8, 3.9, 3), "num_workers=0") == "2.8-3.9x as fast as num_workers=0"
    assert compared(None, "num_workers=0", unpaired="separate bursts") == \
        "not paired with num_workers=0 (separate bursts): no interval"
    inside = Ratio(1.005, 0.985, 1.025, 6)
    assert inside.within() and inside.settled() and not inside.faster


# --- the choice and its words ------------------------------------------------------------------

def test_an_indistinguishable_pair_keeps_the_cheaper_and_says_so():
    # A costlier config ahead by 5% in median, but the rounds do not agree: the rule is kept.
    dear, rule = Finalist(MORE, (1100.0, 980.0, 1075.0)), Finalist(RULE, (1000.0, 1010.0, 1000.0))
    assert choose([dear, rule], [], rule=RULE).config == RULE
    assert rule_verdict(RULE, RULE, [dear, rule]).endswith(": the cheaper of the two kept")
    # A cheaper pick the rounds cannot tell from the rule: kept, and said.
    cheap = Finalist(PICK, (1000.0, 1040.0, 990.0))
    dearer_rule = Finalist(MORE, (1010.0, 1000.0, 1010.0))
    pick = choose([cheap, dearer_rule], [], rule=MORE).config
    words = rule_verdict(pick, MORE, [cheap, dearer_rule])
    assert pick == PICK and words.startswith("indistinguishable from the rule (") and "cheaper of the two kept" in words


def test_a_costlier_pick_clearly_ahead_stands():
    dear, rule = Finalist(MORE, (1200.0, 1210.0, 1190.0)), Finalist(RULE, (1000.0, 1005.0, 995.0))
    assert choose([dear, rule], [], rule=RULE).config == MORE
    assert rule_verdict(MORE, RULE, [dear, rule]) == "faster than the rule by 19-21%"
    assert rule_settled([dear, rule], MORE, RULE)


# --- the final ---------------------------------------------------------------------------------

class StubRunner:
    """A final's measurement: each config's rate a round, from a table, in order."""

    def __init__(self, rates: dict):
        self.rates = {c: list(r) for c, r in rates.items()}
        self.calls: list[LoaderConfig] = []

    def __call__(self, config: LoaderConfig) -> TrialResult:
        self.calls.append(config)
        return TrialResult(config, OK, samples_per_s=self.rates[config].pop(0), seconds=0.0, window_s=0.0)


def history_of(*configs, rate=1000.0):
    return [TrialResult(c, OK, samples_per_s=rate, seconds=0.01, window_s=0.005, batches=10) for c in configs]


def test_the_final_stops_once_the_rounds_settle_the_pick_against_the_rule():
    clear = StubRunner({MORE: [1500, 1510, 1490] + [1500] * 9, RULE: [1000, 1005, 1000] + [1000] * 9})
    final = Final(Clock(600), clear, lambda e: None)
    finals = final.run([MORE, RULE], history_of(MORE, RULE), RULE, None)
    assert final.rounds == FINAL_MIN_ROUNDS and len(clear.calls) == 2 * FINAL_MIN_ROUNDS
    assert all(len(f.rates) == FINAL_MIN_ROUNDS for f in finals)
    # Rounds that disagree go on, to the most rounds, and then the cheaper is kept.
    noisy = StubRunner({MORE: [1100, 950, 1080, 960, 1100, 970] * 2, RULE: [1000] * 12})
    final = Final(Clock(600), noisy, lambda e: None)
    finals = final.run([MORE, RULE], history_of(MORE, RULE), RULE, None)
    assert final.rounds == FINAL_MAX_ROUNDS
    assert choose(finals, history_of(MORE, RULE), rule=RULE).config == RULE


def test_the_final_is_capped_by_the_budget():
    runner = StubRunner({MORE: [1100, 950] * 6, RULE: [1000] * 12})
    final = Final(Clock(0.05), runner, lambda e: None)   # a round is estimated at about 2 x 0.3 s
    assert final.run([MORE, RULE], history_of(MORE, RULE), RULE, None) == [] and runner.calls == []


def test_no_final_between_a_pick_and_itself():
    history = history_of(MORE, RULE)
    # The strategy's pick is the rule's config and no burst challenged it: no final at all.
    assert final_configs([MORE, RULE], RULE, None, history, pick=RULE) == []
    # A burst more than SINGLE_ROUND_MARGIN above the rule challenges it: those two meet.
    ahead = history_of(RULE) + history_of(MORE, rate=1200.0)
    assert final_configs([MORE, RULE], RULE, None, ahead, pick=RULE) == [MORE, RULE]
    # Otherwise the strategy's pick meets the rule as before.
    assert final_configs([MORE, RULE], RULE, None, history, pick=MORE) == [MORE, RULE]
    tuned = TunedConfig(RULE, 1000.0, 0.02, None, None, {"fingerprint": "box", "cpus": 8}, "k", "cpu")
    itself = TuneResult(tuned, tuple(history), (), "", "", "", 1.0, 0, 0, rule=RULE)
    assert itself.verdict == "the pick is the rule's config: no final between a pick and itself"
    assert itself.rule_ratio is None and "the pick is the rule's config" in table(itself)


# --- the record -----------------------------------------------------------------------------

def test_the_result_writes_the_ratio_its_interval_the_verdict_and_the_what_ifs():
    finals = (Finalist(MORE, (1200.0, 1210.0, 1190.0)), Finalist(RULE, (1000.0, 1005.0, 995.0)),
              Finalist(NONE, (400.0, 410.0, 395.0)))
    claim = WhatIfClaim("pin_off", "No pinning", 1100.0, -0.08, -0.05, "paired", (-0.09, -0.01), 3,
                        "measured in 3 paired rounds: −9…−1%")
    result = TuneResult(TunedConfig(MORE, 1200.0, 0.02, 400.0, None, {"fingerprint": "box", "cpus": 8}, "k", "cpu"),
                        tuple(history_of(MORE, RULE, NONE)), finals, "", "", "", 1.0, 0, 0, rule=RULE,
                        what_ifs=(claim,))
    data = json.loads(json.dumps(result.to_dict()))
    lo, hi = data["rule_ratio_interval"]
    assert lo < data["rule_ratio"] < hi and data["rule_ratio_rounds"] == 3
    assert data["verdict"] == "faster than the rule by 19-21%" and data["verdict"] in table(result)
    assert data["baseline_verdict"].endswith("x as fast as num_workers=0") and "x as fast" in table(result)
    assert data["what_ifs"][0]["measured_interval"] == [-0.09, -0.01]
    back = TuneResult.from_dict(data)
    assert back.what_ifs == (claim,) and back.rule_ratio == result.rule_ratio
    bad = json.loads(json.dumps(data))
    bad["what_ifs"][0]["measured_interval"] = [0.1, -0.1]
    with pytest.raises(InvalidRecord, match=r"what_ifs\[0\]\.measured_interval"):
        TuneResult.from_dict(bad)
    bad["what_ifs"][0] = {"name": "x", "change": "y", "predicted_samples_per_s": -1, "predicted_gain": 0}
    with pytest.raises(InvalidRecord, match=r"what_ifs\[0\]\.predicted_samples_per_s"):
        TuneResult.from_dict(bad)


# --- a real tune -------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_cpu_tune_writes_its_comparisons_with_their_intervals_and_the_table_says_them(tmp_path):
    from workloads import BusyWork

    from autoloader import tune

    result = tune(BusyWork(cost_s=0.002), batch_size=16, budget=40, device="cpu", out=str(tmp_path))
    with open(result.path) as fh:
        data = json.load(fh)
    for key in ("rule_ratio", "rule_ratio_interval", "rule_ratio_rounds", "verdict", "baseline_ratio",
                "baseline_verdict", "what_ifs"):
        assert key in data, key
    assert data["verdict"] == result.verdict and data["verdict"] in table(result)
    ratio = result.rule_ratio
    if ratio is not None and ratio.judged:
        lo, hi = data["rule_ratio_interval"]
        assert lo <= data["rule_ratio"] <= hi
        words = "faster than" if lo > 1 else "slower than" if hi < 1 else "indistinguishable from"
        assert data["verdict"].startswith(words) or data["verdict"].startswith(f"{lo:.1f}"), data["verdict"]
    elif result.config == result.rule:
        assert data["verdict"].startswith("the pick is the rule's config")
    rounds = [len(f.rates) for f in result.finals]
    assert all(n <= FINAL_MAX_ROUNDS for n in rounds), rounds
    assert all(w["sure"] for w in data["what_ifs"]) and TuneResult.from_dict(data).what_ifs == result.what_ifs
    assert not any(re.search(r"\d\.\d\dx", line) for line in table(result).splitlines()
                   if "cpus-1 rule" in line or "num_workers=0" in line), table(result)


def test_the_table_says_the_round_medians_where_they_rank_the_pick_and_the_rule_otherwise():
    """The GPU bench's hugefloat (results/benchmarks/README.md, run-20261204b, call 7): the final's
    own medians put the kept pick (837/s) below the rule (880/s); over every paired round, the
    opening's too, which the choice ranks by, the pick leads (1,307 against 775/s). The table says
    so where the two orders differ, and only there."""
    pick, rule = NONE.replace(pin_memory=True), RULE
    finals = (Finalist(pick, (367.0, 1307.0), opening=1354.0), Finalist(rule, (986.0, 775.0), opening=768.0))
    tuned = TunedConfig(pick, finals[0].median, 0.05, finals[0].median, None, {"fingerprint": "box", "cpus": 8},
                        "k", "cuda")
    result = TuneResult(tuned, tuple(history_of(pick, rule)), finals, "", "", "", 1.0, 0, 0, rule=rule)
    line = next(line for line in table(result).splitlines() if "cpus-1 rule" in line)
    assert "880/s" in line and "the pick 1,307/s, the rule 775/s" in line, line
    agreeing = (Finalist(pick, (1300.0, 1307.0), opening=1354.0), Finalist(rule, (986.0, 775.0), opening=768.0))
    result = TuneResult(tuned, tuple(history_of(pick, rule)), agreeing, "", "", "", 1.0, 0, 0, rule=rule)
    assert "over every paired round" not in table(result)
