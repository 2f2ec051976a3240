"""find_knee on synthetic (workers, samples/s) curves."""

from __future__ import annotations

import random

import pytest

from autoloader.search.config import Knee, find_knee
from autoloader.search.policy import MIN_TOLERANCE


def test_rising_then_flat_stops_paying_at_the_plateau_start():
    knee = find_knee([(0, 100), (1, 190), (2, 300), (4, 305), (6, 302), (8, 304)])
    assert knee.stops_paying == 2
    assert knee.peak == 4
    assert knee.starts_hurting is None


def test_rising_then_falling_marks_where_it_starts_hurting():
    knee = find_knee([(0, 100), (1, 200), (2, 300), (4, 295), (6, 240), (8, 150)])
    assert knee.stops_paying == 2
    assert knee.peak == 2
    assert knee.starts_hurting == 6, "4 is within tolerance of the peak; 6 is the first clear fall"


def test_falling_from_the_start():
    knee = find_knee([(0, 1000), (1, 60), (2, 80)])
    assert (knee.stops_paying, knee.peak, knee.starts_hurting) == (0, 0, 1)


def test_flat_curve_needs_no_workers():
    knee = find_knee([(0, 500), (1, 500), (2, 500), (4, 500)])
    assert (knee.stops_paying, knee.peak, knee.starts_hurting) == (0, 0, None)


def test_noise_within_tolerance_is_a_tie():
    # 1.5% wiggles around a plateau reached at 2 workers: the plateau's first point wins, even
    # though a later point is (within noise) the highest.
    knee = find_knee([(0, 100), (1, 180), (2, 297), (3, 301), (4, 296), (6, 300.5), (8, 298)])
    assert knee.stops_paying == 2
    assert knee.peak == 3
    assert knee.starts_hurting is None


def test_noisy_plateau_randomised():
    rng = random.Random(0)
    for _ in range(200):
        points = [(0, 100.0), (1, 200.0)] + [(w, 400.0 * (1 + rng.uniform(-0.012, 0.012)))
                                             for w in (2, 3, 4, 6, 8)]
        knee = find_knee(points)
        assert knee.stops_paying == 2 and knee.starts_hurting is None


def test_tolerance_is_floored_and_widens_ties():
    points = [(0, 100), (1, 292), (2, 300)]
    assert find_knee(points, tolerance=0.0).tolerance == MIN_TOLERANCE
    assert find_knee(points, tolerance=0.0).stops_paying == 1  # 292 >= 300 * 0.97
    assert find_knee([(0, 100), (1, 280), (2, 300)]).stops_paying == 2
    assert find_knee([(0, 100), (1, 280), (2, 300)], tolerance=0.1).stops_paying == 1


def test_duplicates_are_merged_by_median():
    knee = find_knee([(2, 300), (0, 100), (2, 10), (1, 150), (2, 290), (1, 170)])
    assert knee.curve == ((0, 100.0), (1, 160.0), (2, 290.0))
    assert knee.stops_paying == 2 and knee.peak == 2
    # one wild outlier among three repeats does not move the knee
    knee = find_knee([(0, 100), (1, 300), (1, 5000), (1, 290), (2, 300)])
    assert dict(knee.curve)[1] == 300.0
    assert knee.stops_paying == 1


def test_curve_is_sorted_by_workers():
    knee = find_knee([(4, 1.0), (0, 3.0), (2, 2.0)])
    assert [w for w, _ in knee.curve] == [0, 2, 4]


def test_single_point_and_empty():
    knee = find_knee([(0, 42.0)])
    assert (knee.stops_paying, knee.peak, knee.starts_hurting) == (0, 0, None)
    with pytest.raises(ValueError):
        find_knee([])


def test_knee_round_trips_through_a_dict():
    knee = find_knee([(0, 100.5), (1, 190.25), (2, 300.0), (4, 150.0)], tolerance=0.05)
    assert Knee.from_dict(knee.to_dict()) == knee
