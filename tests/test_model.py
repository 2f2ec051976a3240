"""The pipeline model on synthetic profiles: a known cap, a known knee, the tail and the restarts."""

import random
from dataclasses import replace

import pytest

from autoloader.search.model import Calibration, Model, calibrate
from autoloader.search.profile import Profile, quantile
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig


def profile(sample_s=0.002, n=256, tail=None, step_s=0.001, recv_s=0.0002, pin_s=0.0005, h2d=0.0003,
            pageable=0.002, cpus=8, batch_size=32, epoch_batches=1000, startup_s=0.2, cpu_share=1.0,
            recv_busy_s=None):
    rng = random.Random(0)
    costs = [sample_s * rng.uniform(0.9, 1.1) for _ in range(n)]
    if tail:
        share, cost = tail
        costs = [cost if rng.random() < share else c for c in costs]
    return Profile(batch_size=batch_size, sample_s=tuple(costs), collate_s=0.0005, sample_bytes=4096,
                   recv_s=recv_s, pin_s=pin_s, h2d_pinned_s=h2d, h2d_pageable_s=pageable, step_s=step_s,
                   startup_s=startup_s, worker_pss=100 << 20, cpus=cpus, epoch_batches=epoch_batches,
                   sample_cpu_share=cpu_share, recv_busy_s=recv_busy_s)


def cfg(workers, pin=True, prefetch=2, persistent=True, in_order=True, batch_size=32):
    return LoaderConfig.make(batch_size, workers, pin, prefetch, persistent, in_order)


def test_workers_scale_until_the_cores_run_out():
    model = Model(profile(cpus=8, step_s=0.0001), "cuda")
    one, four, eight = (model.predict(cfg(n)).steady_samples_per_s for n in (1, 4, 8))
    assert 3.5 < four / one < 4.2
    # Past the cores, more workers cannot make more batches.
    sixteen = model.predict(cfg(16)).steady_samples_per_s
    assert sixteen < eight * 1.05
    assert model.predict(cfg(4)).bound == "workers"


def test_a_slow_step_caps_the_rate_and_the_loop_stops_waiting():
    model = Model(profile(step_s=0.05), "cuda")   # 32 samples / 0.05 s = 640/s at most
    fed = model.predict(cfg(8))
    assert fed.steady_samples_per_s == pytest.approx(32 / (0.05 + 0.0003), rel=0.03)
    assert fed.wait_share < 0.02 and fed.bound == "consumer"


def test_the_knee_sits_where_workers_outpace_the_consumer():
    # Each worker makes 32 x 2 ms = 64 ms a batch; the step takes 16 ms: 4 workers keep up.
    model = Model(profile(step_s=0.016, cpus=16), "cuda")
    rates = {n: model.predict(cfg(n)).steady_samples_per_s for n in (2, 3, 4, 5, 8)}
    assert rates[2] < rates[3] < rates[5]
    assert rates[8] == pytest.approx(rates[5], rel=0.03)


def test_a_heavy_tail_rewards_deeper_prefetch_and_out_of_order_delivery():
    model = Model(profile(sample_s=0.001, tail=(0.02, 0.05), cpus=16, step_s=0.001), "cuda")
    shallow = model.predict(cfg(8, prefetch=2)).steady_samples_per_s
    deep = model.predict(cfg(8, prefetch=16)).steady_samples_per_s
    unordered = model.predict(cfg(8, prefetch=2, in_order=False)).steady_samples_per_s
    assert deep > shallow * 1.01
    assert unordered > shallow * 1.01


def test_waiting_samples_pay_past_one_worker_per_core():
    busy = Model(profile(cpus=4, cpu_share=1.0, step_s=0.0001), "cuda")
    sleepy = Model(profile(cpus=4, cpu_share=0.1, step_s=0.0001), "cuda")
    assert busy.predict(cfg(16)).steady_samples_per_s < busy.predict(cfg(4)).steady_samples_per_s * 1.5
    assert sleepy.predict(cfg(16)).steady_samples_per_s > sleepy.predict(cfg(4)).steady_samples_per_s * 2.5


def test_fresh_workers_each_epoch_pay_the_start_up_on_short_epochs():
    model = Model(profile(epoch_batches=10, startup_s=1.5, cpus=16, step_s=0.001), "cuda")
    kept = model.predict(cfg(8, persistent=True)).samples_per_s
    fresh = model.predict(cfg(8, persistent=False)).samples_per_s
    assert fresh < kept * 0.7
    refill = model.predict(cfg(8, persistent=True)).restart_s
    assert model.predict(cfg(8, persistent=False)).restart_s == pytest.approx(1.5 + refill)


def test_pageable_copies_block_the_loop_and_pinning_moves_them_off_it():
    # Big batches, cheap samples: the main process's copies are the cap.
    model = Model(profile(sample_s=0.00001, step_s=0.001, pin_s=0.004, h2d=0.002, pageable=0.02, cpus=16), "cuda")
    pinned = model.predict(cfg(8, pin=True))
    pageable = model.predict(cfg(8, pin=False))
    assert pinned.steady_samples_per_s > pageable.steady_samples_per_s * 2
    assert pageable.bound in ("main", "consumer")


def test_a_busy_workers_receive_lands_on_the_loop_without_a_pin_thread():
    # NOTE [ A busy worker's receive ]: 8 ms to take a batch from a worker running Python. The pin
    # thread takes it off the loop; without one the loop pays it, inside next().
    slow = profile(sample_s=0.0005, step_s=0.004, pin_s=0.001, pageable=0.001, cpus=16, recv_busy_s=0.008)
    model, idle = Model(slow, "cuda"), Model(profile(sample_s=0.0005, step_s=0.004, pin_s=0.001, pageable=0.001,
                                                     cpus=16), "cuda")
    pinned, pageable = model.predict(cfg(12, pin=True)), model.predict(cfg(12, pin=False))
    assert pageable.steady_samples_per_s < idle.predict(cfg(12, pin=False)).steady_samples_per_s * 0.75
    assert pinned.steady_samples_per_s > pageable.steady_samples_per_s * 1.2
    assert pageable.receive_share > 0.2 and pageable.wait_share >= pageable.receive_share
    # A burst that waited only for its own receive speaks for the loop, not the workers.
    burst = TrialResult(cfg(12, pin=False), OK, samples_per_s=pageable.samples_per_s,
                        steady_samples_per_s=pageable.steady_samples_per_s * 0.8,
                        wait_fraction=pageable.wait_share)
    calib = calibrate(model, [burst])
    assert calib.main > 1.1 and calib.worker == 1.0


def test_a_fed_loop_faster_than_a_pin_bound_prediction_corrects_the_pin_thread():
    # The model says the pin thread holds the pipeline (a slow receive); the burst's loop did not
    # wait and ran 2x the prediction: the pin thread is faster than modelled, the loop is not.
    model = Model(profile(sample_s=0.0002, step_s=0.002, pin_s=0.001, cpus=16, recv_busy_s=0.01), "cuda")
    predicted = model.predict(cfg(12, pin=True))
    assert predicted.bound == "pin"
    burst = TrialResult(cfg(12, pin=True), OK, samples_per_s=predicted.samples_per_s * 2,
                        steady_samples_per_s=predicted.steady_samples_per_s * 2, wait_fraction=0.02)
    calib = calibrate(model, [burst])
    assert calib.pin < 0.7 and calib.pin_fits == 1 and calib.main == pytest.approx(1.0, abs=0.15)
    assert model.predict(cfg(12, pin=True), calib).steady_samples_per_s == pytest.approx(
        burst.steady_samples_per_s, rel=0.1)


def test_without_workers_the_loop_does_every_stage_in_turn():
    p = profile(cpus=8)
    model = Model(p, "cpu")
    zero = model.predict(LoaderConfig.make(32, 0, False))
    batch = p.worker_batch_s(32)
    assert zero.steady_samples_per_s == pytest.approx(32 / (batch + p.step_s), rel=0.05)
    assert zero.wait_share > 0.9


def test_calibration_pulls_the_worker_term_to_the_bursts():
    model = Model(profile(cpus=16, step_s=0.0001), "cuda")
    truth = Model(profile(sample_s=0.003, cpus=16, step_s=0.0001), "cuda")   # workers 1.5x slower
    history = [TrialResult(c, OK, samples_per_s=truth.predict(c).samples_per_s,
                           steady_samples_per_s=truth.predict(c).steady_samples_per_s)
               for c in (cfg(2), cfg(4))]
    calib = calibrate(model, history)
    assert calib.worker == pytest.approx(1.5, rel=0.1)
    assert model.predict(cfg(6), calib).steady_samples_per_s == pytest.approx(
        truth.predict(cfg(6)).steady_samples_per_s, rel=0.08)


def test_the_start_up_is_fitted_from_the_bursts_start_ups():
    model = Model(profile(startup_s=0.1), "cuda")
    batch = model.profile.worker_batch_s()
    history = [TrialResult(cfg(n), OK, samples_per_s=1000.0, steady_samples_per_s=1000.0,
                           startup_s=0.5 + 0.1 * n + batch) for n in (2, 4, 8)]
    calib = calibrate(model, history)
    assert calib.startup_base == pytest.approx(0.5, abs=0.15)
    assert calib.startup_per_worker == pytest.approx(0.1, rel=0.3)


def test_quantiles_and_the_profile_round_trip():
    p = profile(tail=(0.02, 0.05))
    q = p.sample_quantiles()
    assert q["median"] < q["p90"] <= q["p99"] <= q["max"] == max(p.sample_s)
    assert quantile([1.0, 2.0, 3.0], 0.5) == 2.0
    assert Profile.from_dict(p.to_dict()) == p


def test_a_prediction_resting_on_a_stage_no_burst_measured_is_the_least_certain():
    # Workers make 32 x 2 ms = 64 ms a batch; the step takes 16 ms: 2 workers are worker-bound,
    # 12 are bound by the step. Bursts at 1 and 2 workers correct the worker term only.
    model = Model(profile(step_s=0.016, cpus=16), "cuda")
    history = [TrialResult(c, OK, samples_per_s=model.predict(c).samples_per_s,
                           steady_samples_per_s=model.predict(c).steady_samples_per_s) for c in (cfg(1), cfg(2))]
    calib = calibrate(model, history)
    assert calib.worker_fits == 2 and calib.main_fits == 0

    def spread(config):   # the prediction's relative range over the terms no burst corrected
        low, high = model.rate_range(config, calib)
        return (high - low) / model.predict(config, calib).samples_per_s

    assert spread(cfg(12)) > spread(cfg(2))
    assert Calibration().worker_fits == 0


def test_epoch_boundaries_of_kept_workers_are_fitted_from_the_bursts_that_crossed_one():
    # NOTE [ An epoch boundary of kept workers ]: 20 ms plus 2 ms a worker, as two bursts measured
    # it; a burst that crossed no boundary (its restart modelled, not measured) says nothing.
    model = Model(profile(epoch_batches=20, cpus=16, step_s=0.001), "cuda")

    def burst(n, restart, crossed=3):
        rate = model.predict(cfg(n)).steady_samples_per_s
        return TrialResult(cfg(n), OK, samples_per_s=rate, steady_samples_per_s=rate, epoch_restart_s=restart,
                           epochs_crossed=crossed)

    calib = calibrate(model, [burst(4, 0.028), burst(12, 0.044), burst(8, 5.0, crossed=0)])
    assert calib.restart_base == pytest.approx(0.020, abs=0.002)
    assert calib.restart_per_worker == pytest.approx(0.002, rel=0.1)
    assert model.predict(cfg(16), calib).restart_s == pytest.approx(0.052, rel=0.05)
    # Fresh workers pay their start-up on top of the same boundary.
    fresh = model.predict(cfg(16, persistent=False), calib)
    assert fresh.restart_s == pytest.approx(0.052 + model.startup_s(16, calib), rel=0.05)


def test_on_short_epochs_a_boundary_that_grows_with_workers_caps_how_many_pay():
    # 20-batch epochs; each worker adds 10 ms to every boundary. Past the workers the loop needs,
    # more only lengthen the boundaries, so the model's best count is no longer the most.
    model = Model(profile(sample_s=0.001, epoch_batches=20, cpus=32, step_s=0.002), "cuda")
    flat = [model.predict(cfg(n)).samples_per_s for n in (8, 16, 32)]
    calib = replace(Calibration(), restart_base=0.01, restart_per_worker=0.01)
    costly = {n: model.predict(cfg(n), calib).samples_per_s for n in (4, 8, 16, 32)}
    assert flat[2] >= flat[0] * 0.98           # without the measured boundaries, more never loses
    assert costly[32] < costly[16] < costly[8]


def _bursts(truth, counts, scale=None):
    scale = scale or {}
    out = []
    for n in counts:
        rate = truth.predict(cfg(n)).steady_samples_per_s * scale.get(n, 1.0)
        out.append(TrialResult(cfg(n), OK, samples_per_s=rate, steady_samples_per_s=rate, wait_fraction=0.5))
    return out


def test_the_cpus_the_workers_really_get_are_fitted_between_the_counts_measured():
    # The profile counts 16 CPUs; the workers get 8 (a quota the profile did not see).
    model = Model(profile(cpus=16, step_s=0.0001), "cuda")
    truth = Model(profile(cpus=8, step_s=0.0001), "cuda")
    calib = calibrate(model, _bursts(truth, (4, 14)))
    assert calib.cpus == pytest.approx(8, abs=1)
    assert model.predict(cfg(12), calib).steady_samples_per_s == pytest.approx(
        truth.predict(cfg(12)).steady_samples_per_s, rel=0.05)


def test_no_cap_is_fitted_below_every_count_measured():
    # Two bursts at neighbouring counts, the larger 12% low by noise: a cap below both would fit
    # that noise ("9 CPUs"); it can lie only between them, so 8 workers keep their rate.
    model = Model(profile(cpus=16, step_s=0.0001), "cuda")
    calib = calibrate(model, _bursts(model, (15, 16), {16: 0.88}))
    assert calib.cpus is None or calib.cpus >= 15
    assert model.predict(cfg(8), calib).steady_samples_per_s > 0.85 * model.predict(cfg(8)).steady_samples_per_s


def test_a_start_up_line_never_has_a_negative_base():
    # Bursts at 15 and 16 workers whose start-ups differ by their noise: the free line through
    # them would start at -7 s and charge 0.6 s a worker.
    model = Model(profile(startup_s=0.1, cpus=16), "cuda")
    batch = model.profile.worker_batch_s()
    history = [TrialResult(cfg(n), OK, samples_per_s=1000.0, steady_samples_per_s=1000.0, startup_s=s + batch)
               for n, s in ((15, 2.0), (16, 2.6))]
    calib = calibrate(model, history)
    assert calib.startup_base == 0.0
    assert 0.1 < calib.startup_per_worker < 0.2    # through the origin, about 2.3 s over 15.5 workers


def test_the_receive_is_a_fixed_part_and_one_that_grows_with_the_batch():
    # NOTE [ The receive's two parts ]: 2 ms at 32 samples, 1.2 ms of it fixed.
    p = replace(profile(recv_s=0.002), recv_fixed_s=0.0012)
    model = Model(p, "cpu")
    assert model.recv_s(32, 0.0) == pytest.approx(0.002)
    assert model.recv_s(8, 0.0) == pytest.approx(0.0012 + 0.0008 / 4)
    # Without the fixed part measured, the whole receive scales with the batch, as before.
    assert Model(profile(recv_s=0.002), "cpu").recv_s(8, 0.0) == pytest.approx(0.0005)


def test_the_others_demand_is_read_off_what_they_took_beside_the_profile():
    # NOTE [ Others' demand ]: with room to spare they wanted what they took; past it the CPUs
    # were shared, the profile's one thread getting C - O.
    assert Model(replace(profile(cpus=8), others_cpus=3.0), "cpu").others_demand == pytest.approx(3.0)
    assert Model(replace(profile(cpus=2), others_cpus=1.5), "cpu").others_demand == pytest.approx(3.0)
    assert Model(replace(profile(cpus=2), others_cpus=None), "cpu").others_demand == 0.0
    assert Model(replace(profile(cpus=2), others_cpus=2.0), "cpu").others_demand == pytest.approx(4.0)   # bounded


def test_a_busy_machine_slows_what_wants_more_cpus_than_the_others_leave():
    quiet = Model(profile(cpus=2, recv_s=0.0001), "cpu")
    busy = Model(replace(profile(cpus=2, recv_s=0.0001), others_cpus=1.5), "cpu")
    for n in (0, 2):
        config = cfg(n, pin=False)
        assert busy.predict(config).samples_per_s < 0.7 * quiet.predict(config).samples_per_s
    # Beside others that leave room, nothing changes.
    roomy = Model(replace(profile(cpus=8, recv_s=0.0001), others_cpus=1.0), "cpu")
    assert roomy.predict(cfg(2, pin=False)).samples_per_s == pytest.approx(
        Model(profile(cpus=8, recv_s=0.0001), "cpu").predict(cfg(2, pin=False)).samples_per_s)
