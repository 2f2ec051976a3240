"""scripts/bench/replay.py: the model, corrected by a run's own bursts, against what the bench measured."""

import math
import random

import pytest

from autoloader.search.model import Calibration, Model
from autoloader.search.profile import Profile
from autoloader.search.space import LoaderConfig
from scripts.bench import replay


def profile():
    rng = random.Random(0)
    return Profile(batch_size=32, sample_s=tuple(0.002 * rng.uniform(0.9, 1.1) for _ in range(128)),
                   collate_s=0.0005, sample_bytes=4096, recv_s=0.0002, pin_s=0.0005, h2d_pinned_s=0.0003,
                   h2d_pageable_s=0.002, step_s=0.001, startup_s=0.2, worker_pss=100 << 20, cpus=8,
                   epoch_batches=1000)


def config(workers):
    return LoaderConfig.make(32, workers, True, 2 if workers else None, bool(workers))


def result(workers, rate, **extra):
    return dict({"config": config(workers).loader_kwargs() | {"in_order": True}, "status": "ok",
                 "samples_per_s": rate, "steady_samples_per_s": rate}, **extra)


def records(truth):
    """The tuner burst 4 workers at the truth's rate (the model's workers 1.5x slower than the
    profile's); the bench measured 2 and 6 workers in its grid, 4 in its final."""
    tuner = {"profile": profile().to_dict(), "hardware": {"cpus": 8}, "device": "cuda", "dataset_key": "demo-n100-abc",
             "config": config(4).loader_kwargs(), "samples_per_s": truth(4),
             "trials": [result(4, truth(4), wait_fraction=0.5)]}
    rows = [{"phase": "meta", "workload": None},
            {"phase": "tuner", "workload": "demo", "run_id": "r1", "tuner": tuner},
            {"phase": "grid", "workload": "demo", "run_id": "r1", "result": result(2, truth(2))},
            {"phase": "grid", "workload": "demo", "run_id": "r1", "result": result(6, truth(6))},
            {"phase": "grid", "workload": "demo", "run_id": "r1", "result": dict(result(8, None), status="crashed")}]
    rows += [{"phase": "final", "workload": "demo", "run_id": "r1", "result": result(4, truth(4) * f)}
             for f in (0.9, 1.0, 1.3)]
    return rows


def test_the_model_corrected_by_the_runs_bursts_is_set_against_every_measurement():
    slow = Model(profile(), "cuda")

    def truth(n):
        return slow.predict(config(n), Calibration(worker=1.5)).samples_per_s

    (found,) = replay.replays(records(truth))
    assert found.workload == "demo"
    by = {(r.phase, r.config): r for r in found.readings}
    assert set(by) == {("grid", "w2 pf2 pin1 pw1"), ("grid", "w6 pf2 pin1 pw1"), ("final", "w4 pf2 pin1 pw1")}
    # The final is read at its median; the one burst taught the model the workers' pace, so the
    # grid's other counts are predicted closely too.
    assert by[("final", "w4 pf2 pin1 pw1")].measured == pytest.approx(truth(4))
    assert all(abs(math.exp(r.error) - 1) < 0.1 for r in found.readings)
    # No final in the tune's record: the choice over its one burst is the pick it handed back.
    assert found.recorded == found.chosen == "w4 pf2 pin1 pw1"
    text = replay.report([found])
    assert "| demo |" in text and "3 measurements" in text and found.pick in text


def test_a_measurement_the_model_cannot_fit_reads_as_far_off():
    # Flat in workers: the burst fits 4 workers, but the model still halves the rate at 2.
    (found,) = replay.replays(records(lambda n: 3000.0))
    by = {r.config: r for r in found.readings}
    assert by["w2 pf2 pin1 pw1"].error < math.log(0.7)
    assert found.mean_error > 0.1


def test_the_finals_choice_now_is_set_beside_the_pick_the_run_handed_back():
    # A record whose final handed back the rule (its two rounds' medians ahead) where the choice
    # now, over every paired round, the opening's too, keeps the pick without workers: the
    # report marks the difference and counts it.
    rule, pick = config(7), config(0)
    finals = [{"config": pick.loader_kwargs(), "rates": [367.0, 1307.0], "waits": [0.99, 0.97], "opening": 1354.0},
              {"config": rule.loader_kwargs(), "rates": [986.0, 775.0], "waits": [0.9, 0.9], "opening": 768.0}]
    tuner = {"profile": profile().to_dict(), "hardware": {"cpus": 8}, "device": "cuda", "dataset_key": "demo-n100-abc",
             "config": rule.loader_kwargs(), "samples_per_s": 880.0, "control": rule.loader_kwargs(),
             "trials": [result(0, 1354.0, wait_fraction=0.98), result(7, 768.0, wait_fraction=0.9)], "finals": finals}
    (found,) = replay.replays([{"phase": "tuner", "workload": "demo", "run_id": "r1", "tuner": tuner}])
    assert found.recorded == "w7 pf2 pin1 pw1" and found.chosen == "w0 pin1"
    text = replay.report([found])
    assert "**w0 pin1**" in text and "differs from the pick handed back in 1 of 1" in text
