"""The uint8 what-if as the profile timed the change (NOTE [ A quarter of the bytes ] in
search/profile.py), and the run's measured worker counts standing over the model's along the
ladder (NOTE [ What the run measured stands ] in explain/whatif.py)."""

import dataclasses

import pytest

from autoloader.explain.whatif import standing, uint8_profile
from autoloader.search.choice import Finalist
from autoloader.search.model import Model
from autoloader.search.policy import PREDICTED_TIE
from autoloader.search.profile import UINT8_BYTES, Profile, Uint8Cost, share
from autoloader.search.space import LoaderConfig

from explain_cases import case, evidence
from test_explain import ladder_base, ladder_configs, one

TIMED = Uint8Cost(byte_share=0.25, loop_collate_s=(0.020, 0.008), worker_collate_s=(0.040, 0.010),
                  pin_s=(0.010, 0.003), h2d_pinned_s=(0.004, 0.0012), h2d_pageable_s=(0.040, 0.011),
                  convert_s=0.0005, rounds=2, seconds=0.1)


def test_uint8_scales_each_cost_by_what_the_profile_timed():
    p = dataclasses.replace(case("input/main").profile, collate_main_s=0.02, pin_local_s=0.01, uint8=TIMED)
    q = uint8_profile(p)
    assert q.collate_main_s == pytest.approx(0.02 * 0.4)     # the loop's threads: 8 of 20 ms
    assert q.collate_s == pytest.approx(p.collate_s * 0.25)  # a worker's one thread: 10 of 40 ms
    assert q.pin_s == pytest.approx(p.pin_s * 0.3) and q.pin_local_s == pytest.approx(0.01 * 0.3)
    assert q.h2d_pinned_s == pytest.approx(p.h2d_pinned_s * 0.3)
    assert q.h2d_pageable_s == pytest.approx(p.h2d_pageable_s * 0.275)
    assert q.step_s == pytest.approx(p.step_s + 0.0005)      # the step converts back to float32
    assert q.recv_s == pytest.approx(p.recv_s * 0.25)        # the receive: its bytes (no fixed part timed)
    assert q.sample_s == p.sample_s                          # the samples' own work is kept
    # Untimed, the bytes' share stands in for every cost, and the step is as it was.
    bare = uint8_profile(dataclasses.replace(p, uint8=None))
    assert bare.collate_main_s == pytest.approx(0.02 * UINT8_BYTES) and bare.step_s == p.step_s


def test_a_pair_that_read_uint8_slower_is_noise():
    assert share((0.010, 0.020)) == 1.0 and share((0.010, 0.004)) == pytest.approx(0.4)
    assert share(None) == UINT8_BYTES and share((0.0, 0.001), 0.3) == 0.3


def test_a_pair_that_read_it_faster_than_its_bytes_is_floored_at_them():
    # hugefloat's profile on the H200: the pin 5.56 ms -> 0.75 ms (7.5x) for a quarter of the bytes.
    assert share((0.00556, 0.00075), 0.25) == 0.25 and share((0.010, 0.001)) == UINT8_BYTES


def test_the_timed_change_shrinks_the_what_if_where_the_loop_s_threads_hold_it():
    ev = case("input/main")
    pick = LoaderConfig.make(ev.profile.batch_size, 0, True)
    loop_bound = dataclasses.replace(ev.profile, collate_main_s=0.05, pin_local_s=0.01)
    bytes_only = one(evidence(loop_bound, "cuda", pick), "uint8")
    timed = one(evidence(dataclasses.replace(loop_bound, uint8=TIMED), "cuda", pick), "uint8")
    assert timed.gain < bytes_only.gain


def test_the_profile_keeps_the_timed_change_and_reads_older_records_without_it():
    p = dataclasses.replace(case("input/main").profile, uint8=TIMED)
    assert Profile.from_dict(p.to_dict()) == p
    older = dataclasses.replace(p, uint8=None).to_dict()
    assert "uint8" not in older and Profile.from_dict(older).uint8 is None


def test_a_worker_count_the_run_measured_slow_stands_over_the_model():
    """f79ab31's hugefloat: the pick without workers, the model (its worker terms unfitted) reading
    workers far above it, the final measuring them at half the pick."""
    p = case("input/main").profile
    pick = LoaderConfig.make(p.batch_size, 0, True)
    model = Model(p, "cuda")
    base = model.predict(pick).samples_per_s
    configs = ladder_configs(pick, 16, 64)
    eight = next(c for c in configs if c.num_workers == 8)
    assert model.predict(eight).samples_per_s > 1.5 * base
    finals = (Finalist(pick, (base, base)), Finalist(eight, (0.5 * base, 0.5 * base)))
    ev = evidence(p, "cuda", pick, finals=finals, samples_per_s=base)
    factor = standing(ev, base)
    assert factor(pick) == 1.0
    for c in configs[1:]:   # every count above the pick's takes the nearest measured one's standing
        assert factor(c) == pytest.approx(min(1.0, 0.5 * base / model.predict(c).samples_per_s))
    w = one(ev, "uint8")
    assert w.base_rate == pytest.approx(base)   # not the model's ladder best, which the run measured false
    assert w.base_config is None                # the gain is over the pick
    changed = Model(uint8_profile(p), "cuda")
    rated = {c: changed.predict(c).samples_per_s * factor(c) for c in configs}
    top = max(rated.values())
    chosen = min((c for c, r in rated.items() if r >= top * (1 - PREDICTED_TIE)), key=lambda c: c.cost())
    assert w.config == chosen and w.rate == pytest.approx(rated[chosen])
    # Unmeasured, the model's ladder stands as before.
    alone = one(evidence(p, "cuda", pick), "uint8")
    assert alone.base_rate == pytest.approx(ladder_base(evidence(p, "cuda", pick))) and alone.base_rate > 1.5 * base
    # ... and says which config its gain is over, for the bench to measure the change against.
    assert alone.base_config is not None and alone.base_config.num_workers > 0
    assert model.predict(alone.base_config).samples_per_s == pytest.approx(alone.base_rate)
