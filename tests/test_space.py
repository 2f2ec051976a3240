"""The search space: LoaderConfig's rules, keys, batch-size parsing."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from torch.utils.data import DataLoader
from workloads import Tiny

from autoloader import LoaderConfig, UsageError
from autoloader.search.settings import PERSISTENT, PIN, PREFETCH, PREFETCH_CHOICES
from autoloader.search.space import SearchSpace, parse_batch_sizes


def all_configs(space: SearchSpace):
    """Every valid config of a space, by brute force."""
    out = []
    for bs, w, pin in itertools.product(space.batch_sizes, range(space.max_workers + 1), space.values(PIN)):
        if w == 0:
            out.append(LoaderConfig(bs, 0, pin))
            continue
        for pf, pw in itertools.product(space.values(PREFETCH), space.values(PERSISTENT)):
            out.append(LoaderConfig(bs, w, pin, pf, pw))
    return out


SPACE = SearchSpace(batch_sizes=(8, 32, 128), max_workers=6, pin_memory=(True, False))
CPU_SPACE = SearchSpace(batch_sizes=(64,), max_workers=8, pin_memory=(False,))


def assert_usage(excinfo, *needles):
    """A UsageError in the house style: names the value received and says how to fix it."""
    message = str(excinfo.value)
    assert "(got " in message and "Fix:" in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


# --- LoaderConfig rules -------------------------------------------------------------------------

@pytest.mark.parametrize("prefetch, persistent", [(2, False), (None, True), (4, True)])
def test_worker_only_settings_need_workers(prefetch, persistent):
    with pytest.raises(UsageError) as excinfo:
        LoaderConfig(16, 0, False, prefetch, persistent)
    off = {name: value for name, value in (("prefetch_factor", prefetch), ("persistent_workers", persistent))
           if value not in (None, False)}
    assert_usage(excinfo, "num_workers > 0", repr(off), "LoaderConfig.make", *off)


@pytest.mark.parametrize("prefetch", [None, 0, -1])
def test_workers_need_a_positive_prefetch(prefetch):
    with pytest.raises(UsageError) as excinfo:
        LoaderConfig(16, 2, False, prefetch, True)
    assert_usage(excinfo, "prefetch_factor", repr(prefetch), "use 2")


@pytest.mark.parametrize("batch_size", [0, -3])
def test_bad_batch_size_names_value_and_fix(batch_size):
    with pytest.raises(UsageError) as excinfo:
        LoaderConfig(batch_size, 0, False)
    assert_usage(excinfo, "batch size", repr(batch_size), "--batch-size 1")
    with pytest.raises(UsageError):
        LoaderConfig.make(batch_size, 2, False)


def test_negative_workers_name_value_and_fix():
    with pytest.raises(UsageError) as excinfo:
        LoaderConfig(16, -1, False)
    assert_usage(excinfo, "num_workers", "-1", "use 0")


def test_usage_error_is_a_value_error_with_exit_code_2():
    with pytest.raises(ValueError) as excinfo:
        LoaderConfig(0, 0, False)
    assert excinfo.value.exit_code == 2


def test_make_drops_worker_settings_at_zero_workers():
    config = LoaderConfig.make(16, 0, True, prefetch_factor=8, persistent_workers=True)
    assert (config.prefetch_factor, config.persistent_workers) == (None, False)
    assert config.loader_kwargs() == {"batch_size": 16, "num_workers": 0, "pin_memory": True}
    # and a DataLoader accepts them (it raises when prefetch_factor comes without workers)
    DataLoader(Tiny(), **config.loader_kwargs())


def test_make_fills_worker_settings_with_workers():
    config = LoaderConfig.make(16, 3, False)
    assert (config.prefetch_factor, config.persistent_workers) == (2, True)
    assert LoaderConfig.make(16, 3, False, prefetch_factor=None).prefetch_factor == 2
    kwargs = LoaderConfig.make(16, 3, False, 4, False).loader_kwargs()
    assert kwargs == {"batch_size": 16, "num_workers": 3, "pin_memory": False, "prefetch_factor": 4,
                      "persistent_workers": False}
    loader = DataLoader(Tiny(), **kwargs)
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (3, 4, False)


def test_replace_keeps_configs_valid():
    config = LoaderConfig.make(16, 2, False, 4, True)
    assert config.replace(num_workers=0) == LoaderConfig(16, 0, False)
    assert LoaderConfig(16, 0, False).replace(num_workers=2) == LoaderConfig(16, 2, False, 2, False)
    assert config.replace(prefetch_factor=8) == LoaderConfig(16, 2, False, 8, True)
    assert config.replace(batch_size=64).batch_size == 64


def test_configs_are_frozen_and_hashable():
    config = LoaderConfig.make(16, 2, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_workers = 4  # type: ignore[misc]
    assert len({config, LoaderConfig.make(16, 2, False)}) == 1


def test_cost_orders_ties_towards_the_cheaper_config():
    configs = [LoaderConfig.make(16, 2, True, 4, True), LoaderConfig.make(16, 2, False, 2, False),
               LoaderConfig.make(16, 1, True, 8, True), LoaderConfig.make(16, 0, True)]
    assert min(configs, key=LoaderConfig.cost) == LoaderConfig(16, 0, True)
    assert min(configs[:3], key=LoaderConfig.cost) == LoaderConfig.make(16, 1, True, 8, True)
    assert min(configs[:2], key=LoaderConfig.cost) == LoaderConfig.make(16, 2, False, 2, False)


def test_over_a_whole_run_kept_workers_are_cheaper_than_fresh_ones_each_epoch():
    kept, fresh = LoaderConfig.make(16, 4, True, 2, True), LoaderConfig.make(16, 4, True, 2, False)
    assert min([fresh, kept], key=LoaderConfig.cost) == kept
    ordered, unordered = LoaderConfig.make(16, 4, True, 2, True), LoaderConfig.make(16, 4, True, 2, True, False)
    assert min([unordered, ordered], key=LoaderConfig.cost) == ordered


def test_out_of_order_delivery_is_a_loader_argument_only_when_chosen():
    assert "in_order" not in LoaderConfig.make(16, 4, True).loader_kwargs()
    unordered = LoaderConfig.make(16, 4, True, 2, True, in_order=False)
    assert unordered.loader_kwargs()["in_order"] is False and unordered.key.endswith("-ooo")
    assert LoaderConfig.from_dict(unordered.to_dict()) == unordered
    assert LoaderConfig.make(16, 0, True, in_order=False).in_order   # no workers: nothing to reorder


# --- keys ---------------------------------------------------------------------------------------

def test_keys_are_unique_across_the_space():
    configs = all_configs(SPACE)
    keys = [c.key for c in configs]
    assert len(set(keys)) == len(configs) == len(set(configs))


def test_keys_are_stable():
    # A key names a stored record: it must not change between runs or versions of a config.
    assert LoaderConfig.make(16, 2, False).key == "bs16-w2-pin0-pf2-pw1"
    assert LoaderConfig.make(128, 0, True, 8, True).key == "bs128-w0-pin1"
    assert LoaderConfig(32, 4, True, 8, False).key == "bs32-w4-pin1-pf8-pw0"
    assert LoaderConfig.make(16, 2, False).key == LoaderConfig(16, 2, False, 2, True).key
    assert LoaderConfig.make(16, 2, False).replace(prefetch_factor=2).key == "bs16-w2-pin0-pf2-pw1"
    for config in all_configs(SPACE):
        assert config.key == config.replace().key


# --- worker ladder ------------------------------------------------------------------------------

def test_contains_and_default_config():
    assert SPACE.contains(LoaderConfig.make(8, 6, True, 8, False))
    assert not SPACE.contains(LoaderConfig.make(8, 7, True))           # too many workers
    assert not SPACE.contains(LoaderConfig.make(16, 1, True))          # batch size not searched
    assert not SPACE.contains(LoaderConfig.make(8, 1, True, 3, True))  # prefetch not offered
    assert not CPU_SPACE.contains(LoaderConfig.make(64, 1, True))      # pinning not offered
    assert CPU_SPACE.default_config(0) == LoaderConfig(64, 0, False)
    assert CPU_SPACE.default_config(4) == LoaderConfig(64, 4, False, 2, True)
    assert SPACE.default_config(2, batch_size=32) == LoaderConfig(32, 2, True, 2, True)
    assert PREFETCH_CHOICES[0] == 2


@pytest.mark.parametrize("kwargs, needle", [
    ({"batch_sizes": ()}, "--batch-size"),
    ({"batch_sizes": (0, 16)}, "0"),
    ({"batch_sizes": (16, 2.5)}, "2.5"),
    ({"max_workers": -1}, "-1"),
])
def test_search_space_rejects_bad_input(kwargs, needle):
    args = {"batch_sizes": (16,), "max_workers": 4, "pin_memory": (False,), **kwargs}
    with pytest.raises(UsageError) as excinfo:
        SearchSpace(**args)
    assert_usage(excinfo, needle)


# --- parse_batch_sizes --------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("64,128,256", (64, 128, 256)),
    ("256, 64 ,64", (64, 256)),
    ("8", (8,)),
    ("16,", (16,)),
])
def test_parse_batch_sizes(text, expected):
    assert parse_batch_sizes(text) == expected


@pytest.mark.parametrize("text", ["", ",", "abc", "8,x", "8.5", "0", "16,0", "-8", "8;16"])
def test_parse_batch_sizes_errors_name_the_text_and_a_fix(text):
    with pytest.raises(UsageError) as excinfo:
        parse_batch_sizes(text)
    assert_usage(excinfo, repr(text), "--batch-sizes 64,128,256")
