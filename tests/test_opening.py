"""The final's opening round (NOTE [ The opening round ] in search/choice.py, NOTE [ A final that
can settle ] in tuning/final.py): which search bursts make it, the pairs it adds, the final it
shortens or leaves out, and the reserve the search keeps for the rule's burst."""

from __future__ import annotations

import json

import pytest

from autoloader.search.budget import Clock, round_seconds, rounds_kept
from autoloader.search.choice import (OPENING_ROUND, OPENING_SPAN, Finalist, choose, opening_round, paired,
                                      rule_settled)
from autoloader.search.policy import FINAL_ROUNDS
from autoloader.search.results import CONSTRAINT, FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.search.codec import InvalidRecord
from autoloader.tuning.final import Final

NONE = LoaderConfig.make(16, 0, False)
PICK = LoaderConfig.make(16, 3, False, 2, True)
RULE = LoaderConfig.make(16, 1, False, 2, True)
MORE = LoaderConfig.make(16, 6, False, 2, True)


def burst(config, rate=1000.0, **kw):
    return TrialResult(config, kw.pop("status", OK), samples_per_s=rate, seconds=0.01, window_s=0.005, batches=10, **kw)


# --- which bursts open the final ----------------------------------------------------------------

def test_back_to_back_bursts_of_the_finalists_are_the_opening_round():
    history = [burst(NONE, 400.0), burst(PICK, 1500.0), burst(RULE, 1000.0)]
    assert opening_round(history, [PICK, RULE]) == {PICK: history[1], RULE: history[2]}
    # Within the longest final round's span (the baseline's burst between them): still one round.
    assert opening_round([burst(PICK), burst(NONE), burst(RULE)], [PICK, RULE]).keys() == {PICK, RULE}
    # One config alone pairs with nothing.
    assert opening_round(history, [RULE, MORE]) == {}


def test_bursts_that_a_final_round_could_not_have_measured_so_are_left_out():
    # Farther apart than a final round spans.
    apart = [burst(PICK)] + [burst(LoaderConfig.make(16, n, False, 2, True)) for n in range(8, 8 + OPENING_SPAN - 1)] \
        + [burst(RULE)]
    assert opening_round(apart, [PICK, RULE]) == {}
    # A trial that ran and failed between them (the trial process may have started again).
    crashed = [burst(PICK), burst(MORE, None, status=FAILED, cause="runner_killed"), burst(RULE)]
    assert opening_round(crashed, [PICK, RULE]) == {}
    # A config predicted past the memory ceiling never ran: nothing happened between them.
    unrun = [burst(PICK), burst(MORE, None, status=CONSTRAINT, cause="predicted_memory"), burst(RULE)]
    assert opening_round(unrun, [PICK, RULE]).keys() == {PICK, RULE}
    # A burst stopped early is no reading.
    pruned = [burst(PICK), burst(RULE, 500.0, pruned=True)]
    assert opening_round(pruned, [PICK, RULE]) == {}
    # A resumed run's stored bursts ran in another process at another time.
    resumed = [burst(PICK), burst(RULE)]
    assert opening_round(resumed, [PICK, RULE], own_from=1) == {}
    assert opening_round(resumed + [burst(MORE)], [PICK, RULE, MORE], own_from=1).keys() == {RULE, MORE}


# --- the pairs it adds --------------------------------------------------------------------------

def test_the_opening_is_a_round_of_the_pairs_not_of_the_median():
    pick = Finalist(PICK, (1500.0, 1530.0), opening=1515.0)
    rule = Finalist(RULE, (1000.0, 1000.0), opening=1000.0)
    assert pick.by_round() == {OPENING_ROUND: 1515.0, 0: 1500.0, 1: 1530.0}
    # The median is the final's own rounds': the bursts corrected the model, these check it.
    assert pick.median == 1515.0 and Finalist(PICK, (1500.0, 1530.0), opening=2000.0).median == 1515.0
    ratio = paired(pick, rule)
    assert ratio.rounds == 3 and ratio.judged and ratio.faster
    without = paired(Finalist(PICK, (1500.0, 1530.0)), Finalist(RULE, (1000.0, 1000.0)))
    assert without.rounds == 2 and (ratio.hi - ratio.lo) < (without.hi - without.lo) / 2   # t95 4.30 against 12.7
    # Stored and read back, as a result's finals are.
    data = json.loads(json.dumps([pick.to_dict(), rule.to_dict()]))
    assert data[0]["opening"] == 1515.0 and data[0]["rounds"] == [0, 1]
    back = [Finalist.from_dict(d, f"finals[{i}]") for i, d in enumerate(data)]
    assert [f.by_round() for f in back] == [pick.by_round(), rule.by_round()]
    assert "opening" not in Finalist(RULE, (1000.0,)).to_dict()   # older records read as they were
    data[0]["opening"] = -3.0
    with pytest.raises(InvalidRecord, match=r"finals\[0\]\.opening"):
        Finalist.from_dict(data[0], "finals[0]")


def test_one_final_round_after_the_opening_is_judged_on_its_pairs():
    # Two pairs, each 1.5x: the costlier pick's interval clears 1, so the choice need not fall
    # back on the single-round margin (which would also take it here, but says nothing of how sure).
    pick, rule = Finalist(MORE, (1500.0,), opening=1490.0), Finalist(RULE, (1000.0,), opening=1000.0)
    assert rule_settled([pick, rule], MORE, RULE)
    assert choose([pick, rule], [], rule=RULE).config == MORE
    # Two pairs that disagree: unsure, and the cheaper of the two (the rule) kept.
    pick, rule = Finalist(MORE, (1300.0,), opening=1010.0), Finalist(RULE, (1000.0,), opening=1000.0)
    assert not rule_settled([pick, rule], MORE, RULE)
    assert choose([pick, rule], [], rule=RULE).config == RULE


# --- the final it shortens or leaves out ----------------------------------------------------------

class Stub:
    def __init__(self, rates: dict):
        self.rates = {c: list(r) for c, r in rates.items()}
        self.calls: list[LoaderConfig] = []

    def __call__(self, config):
        self.calls.append(config)
        return TrialResult(config, OK, samples_per_s=self.rates[config].pop(0), seconds=0.0, window_s=0.0)


def test_the_opening_round_counts_toward_the_rounds_that_settle():
    history = [burst(MORE, 1490.0), burst(RULE, 1000.0)]
    opening = opening_round(history, [MORE, RULE])
    stub = Stub({MORE: [1500, 1510, 1495] * 2, RULE: [1000, 1004, 998] * 2})
    final = Final(Clock(600), stub, lambda e: None)
    finals = final.run([MORE, RULE], history, RULE, None, opening=opening)
    # Settled after one final round: the opening's pair and that round's.
    assert final.rounds == 1 and len(stub.calls) == 2
    assert paired(*finals).rounds == 2 and rule_settled(finals, MORE, RULE)
    # The same rounds without the opening take a second round to settle.
    stub = Stub({MORE: [1500, 1510, 1495] * 2, RULE: [1000, 1004, 998] * 2})
    final = Final(Clock(600), stub, lambda e: None)
    final.run([MORE, RULE], history, RULE, None)
    assert final.rounds == 2


def test_a_final_that_would_end_at_two_pairs_is_not_begun():
    history = [burst(MORE, 1100.0), burst(RULE, 1000.0)]
    opening = opening_round(history, [MORE, RULE])
    one = round_seconds([MORE, RULE], history)   # a final round's estimate
    stub = Stub({MORE: [1100] * 6, RULE: [1000] * 6})
    one_round = Final(Clock(1.5 * one), stub, lambda e: None)
    assert one_round.run([MORE, RULE], history, RULE, None, opening=opening) == [] and stub.calls == []
    # Without an opening the one round the budget holds is run, as before: the rule's first reading.
    assert Final(Clock(1.5 * one), stub, lambda e: None).run([MORE, RULE], history, RULE, None) != []
    # Where the budget holds two rounds, three pairs: the final runs.
    stub = Stub({MORE: [1100, 1180] * 3, RULE: [1000] * 6})
    final = Final(Clock(2.5 * one), stub, lambda e: None)
    assert final.run([MORE, RULE], history, RULE, None, opening=opening) and final.rounds >= 1
    # An opening without the rule pairs nothing the final settles on: the final runs as without one.
    stub = Stub({MORE: [1100] * 6, RULE: [1000] * 6, PICK: [900] * 6})
    final = Final(Clock(600.0), stub, lambda e: None)
    final.run([MORE, PICK, RULE], [burst(MORE), burst(PICK), burst(NONE), burst(RULE, 500.0, pruned=True)], RULE,
              None, opening={MORE: burst(MORE), PICK: burst(PICK)})
    assert final.opening == {} and final.rounds >= 2


# --- the reserve the search keeps -------------------------------------------------------------------

def test_the_search_may_spend_a_round_of_the_reserve_on_the_rules_burst():
    assert rounds_kept([burst(PICK)], RULE, pick_unmeasured=True) == 1
    assert rounds_kept([burst(PICK)], RULE, pick_unmeasured=False) == FINAL_ROUNDS - 1
    assert rounds_kept([burst(PICK), burst(RULE, 500.0, pruned=True)], RULE, False) == FINAL_ROUNDS
    assert rounds_kept([burst(PICK)], None, False) == FINAL_ROUNDS


def test_a_run_whose_final_was_not_begun_says_the_rule_met_the_pick_in_the_bursts_only():
    from autoloader.search.choice import rule_verdict

    bursts = [burst(MORE, 1100.0), burst(RULE, 1000.0)]
    said = rule_verdict(MORE, RULE, [], bursts)
    assert said == "one round against the rule (the search's bursts; no final): not judged"
    assert rule_verdict(MORE, RULE, [], bursts[:1]) == "not paired with the rule: no round of the final measured both"
