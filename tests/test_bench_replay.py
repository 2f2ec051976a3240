"""scripts/bench/replay.py: a recorded tuner run decided again by this checkout's code."""

import json

import pytest

from autoloader.results import OK, TrialResult
from scripts.bench import decide  # the tuner's search and final, as the replay reaches them

CPUS = 16


@pytest.fixture(scope="module")
def replay():
    from scripts.bench import replay as module

    return module


def rate(config):
    """A curve that saturates at 8 workers; prefetch, pinning and persistence change nothing."""
    return 400.0 * min(config.num_workers, 8) + 500.0


def recorded_run(trials_cap=12):
    """A tuner record as the bench keeps it, made by this checkout's own strategy."""
    strategy = decide.strategy(64, CPUS, "cuda")
    history = []
    while len(history) < trials_cap:
        config = strategy.propose(history)
        if config is None:
            break
        history.append(TrialResult(config, OK, samples_per_s=rate(config), rel_interval=0.03, wait_fraction=0.3))
    best = max(history, key=lambda t: t.samples_per_s)
    finals = [{"config": c.loader_kwargs(), "rates": [rate(c)] * 3, "median": rate(c)} for c in decide.finalists(history)]
    return {"config": best.config.loader_kwargs(), "trials": [t.to_dict() for t in history], "finals": finals,
            "hardware": {"cpus": CPUS}}


def write_records(path, tuner):
    rows = [{"workload": "demo", "phase": "tuner", "tuner": tuner}, {"workload": "demo", "phase": "grid"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")


def test_a_run_made_by_this_code_replays_the_same(replay, tmp_path):
    tuner = recorded_run()
    # Record as the pick what the final's rule makes of its rounds (the finalists tie at 8 and up).
    picked = replay.replay("r", "demo", tuner).pick
    tuner["config"] = next(f["config"] for f in tuner["finals"]
                           if replay.short(replay.config_from_kwargs(f["config"])) == picked)
    write_records(tmp_path / "records.jsonl", tuner)
    [found] = replay.replays([str(tmp_path / "records.jsonl")])
    assert found.agrees and found.first_search_difference is None
    assert "1 of 1 tuner run(s) decided the same." in replay.report([found], "cmd")


def test_a_search_that_ran_something_else_is_reported_at_its_first_step(replay):
    tuner = recorded_run()
    trials = tuner["trials"]
    trials[2], trials[3] = trials[3], trials[2]
    found = replay.replay("r", "demo", tuner)
    assert found.first_search_difference.startswith(
        "step 3: ran w%d " % trials[2]["config"]["num_workers"])
    assert not found.agrees


def test_a_different_pick_and_final_are_reported(replay):
    tuner = recorded_run()
    # Recorded: a final of the two slowest trials, and the slower of them picked.
    slowest = sorted(tuner["trials"], key=lambda t: t["samples_per_s"])[:2]
    tuner["finals"] = [{"config": t["config"], "rates": [t["samples_per_s"]] * 3} for t in slowest]
    tuner["config"] = slowest[0]["config"]
    found = replay.replay("r", "demo", tuner)
    assert not found.finalists_agree
    assert found.pick == replay.short(replay.config_from_kwargs(slowest[1]["config"]))
    assert found.pick != found.recorded_pick
    assert "-> " in replay.report([found], "cmd")


def test_a_pick_that_needs_the_finals_waits_is_not_replayed_from_a_final_without_them(replay):
    # Records from before the final kept waits: a trial that kept up means the keeping-up tie
    # could have acted, and the recorded rounds cannot say.
    tuner = recorded_run()
    tuner["trials"][0]["wait_fraction"] = 0.01
    found = replay.replay("r", "demo", tuner)
    assert found.pick is None and found.pick_note and not found.agrees
    assert "not replayable" in replay.report([found], "cmd")
