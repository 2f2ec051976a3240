"""seed_worker: distinct random streams per worker, epoch and rank; identical on a seeded rerun.

Every sample draws once from numpy's global state, ``random``, torch and the worker's numpy
Generator, so a stream shared by two workers, epochs or ranks shows up as repeated values.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader
from workloads import RandomDraws

from autoloader import seed_worker, worker_generator
from autoloader.seeding import worker_seed_sequence

SOURCES = ("np.random", "random", "torch", "worker_generator")
LENGTH = 16


def make_loader(persistent: bool = False, seed: int | None = None) -> DataLoader:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    return DataLoader(RandomDraws(LENGTH), batch_size=None, num_workers=2, worker_init_fn=seed_worker,
                      persistent_workers=persistent, generator=generator)


def epochs(loader: DataLoader, count: int) -> list[list[tuple[float, ...]]]:
    """``count`` epochs of samples, each sample a tuple of one draw per source."""
    return [[tuple(float(v) for v in sample) for sample in loader] for _ in range(count)]


def column(samples, source: str) -> list[float]:
    return [sample[SOURCES.index(source)] for sample in samples]


def assert_disjoint(a, b, what: str) -> None:
    for source in SOURCES:
        shared = set(column(a, source)) & set(column(b, source))
        assert not shared, f"{source}: {what} share draws {sorted(shared)[:3]}"


@pytest.fixture(autouse=True)
def rank_zero(monkeypatch):
    monkeypatch.setenv("RANK", "0")


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh-workers", "persistent-workers"])
def test_workers_draw_distinct_values_within_an_epoch(persistent):
    (samples,) = epochs(make_loader(persistent), 1)
    assert len(samples) == LENGTH
    for source in SOURCES:
        values = column(samples, source)
        assert len(set(values)) == LENGTH, f"{source}: two workers repeat a stream: {values}"


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh-workers", "persistent-workers"])
@pytest.mark.slow
def test_epochs_draw_distinct_values(persistent):
    first, second, third = epochs(make_loader(persistent, seed=7), 3)
    assert_disjoint(first, second, "epochs 1 and 2")
    assert_disjoint(second, third, "epochs 2 and 3")
    assert_disjoint(first, third, "epochs 1 and 3")


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh-workers", "persistent-workers"])
@pytest.mark.slow
def test_ranks_draw_distinct_values(monkeypatch, persistent):
    # Every rank of a job seeds torch alike, so each draws the same base seed: the rank must
    # enter the worker seed. Workers are forked when the iterator starts, so they see RANK.
    runs = {}
    for rank in ("0", "1", "2"):
        monkeypatch.setenv("RANK", rank)
        runs[rank] = epochs(make_loader(persistent, seed=7), 2)
    for a, b in (("0", "1"), ("0", "2"), ("1", "2")):
        for epoch in range(2):
            assert_disjoint(runs[a][epoch], runs[b][epoch], f"ranks {a} and {b} (epoch {epoch + 1})")
    monkeypatch.setenv("RANK", "1")
    assert epochs(make_loader(persistent, seed=7), 2) == runs["1"], "a rank's rerun repeats exactly"


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh-workers", "persistent-workers"])
@pytest.mark.slow
def test_rerun_with_the_same_generator_seed_repeats_exactly(persistent):
    first = epochs(make_loader(persistent, seed=7), 2)
    again = epochs(make_loader(persistent, seed=7), 2)
    assert first == again
    other = epochs(make_loader(persistent, seed=8), 2)
    for epoch in range(2):
        assert_disjoint(first[epoch], other[epoch], "generator seeds 7 and 8")


def test_unseeded_runs_differ():
    # Without a generator the base seed comes from torch's global RNG, which moves on.
    first = epochs(make_loader(), 1)[0]
    second = epochs(make_loader(), 1)[0]
    assert_disjoint(first, second, "two unseeded runs")


def test_seed_sequences_are_distinct_per_rank_and_worker():
    states = {tuple(worker_seed_sequence(1234, worker, rank).generate_state(4))
              for rank in range(8) for worker in range(16)}
    assert len(states) == 8 * 16
    assert (worker_seed_sequence(1234, 3, 1).generate_state(4)
            == worker_seed_sequence(1234, 3, 1).generate_state(4)).all()
    assert not (worker_seed_sequence(1234, 3, 1).generate_state(4)
                == worker_seed_sequence(1235, 3, 1).generate_state(4)).all()


def test_worker_generator_outside_a_worker_says_what_to_do():
    with pytest.raises(RuntimeError, match="worker_init_fn=seed_worker"):
        worker_generator()


def test_worker_generator_is_a_numpy_generator_inside_workers():
    loader = DataLoader(RandomDraws(4), batch_size=None, num_workers=2, worker_init_fn=seed_worker)
    values = [sample[3] for sample in loader]
    assert all(isinstance(v, float) and 0.0 <= v < 1.0 for v in values)
