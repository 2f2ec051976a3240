"""The one batch walker (autoloader/batches.py): the tensors in mappings, lists, tuples and named
tuples mapped with the structure kept, listed, counted in bytes and in samples."""

from __future__ import annotations

from collections import UserDict, namedtuple

import numpy as np
import torch

from autoloader.batches import bytes_in, map_tensors, samples_in, tensors_in

Pair = namedtuple("Pair", "x y")


def test_mapping_a_batch_keeps_its_structure_and_leaves_what_is_no_tensor():
    batch = {"a": Pair(torch.ones(2, 3), [torch.zeros(2), "label"]), "b": 7}
    doubled = map_tensors(batch, lambda t: t * 2)
    assert isinstance(doubled["a"], Pair) and isinstance(doubled["a"].y, list) and doubled["b"] == 7
    assert doubled["a"].x.sum().item() == 12.0 and doubled["a"].y[1] == "label"
    # A mapping that is no dict (Hugging Face's BatchEncoding is a UserDict) comes back a dict.
    assert map_tensors(UserDict(ids=torch.ones(2)), lambda t: t + 1)["ids"].tolist() == [2.0, 2.0]
    assert [t.shape for t in tensors_in(batch)] == [(2, 3), (2,)]


def test_bytes_count_tensors_and_arrays_and_nothing_else():
    assert bytes_in((torch.zeros(4, 4), {"m": np.zeros(3, dtype=np.int16)}, "text", 5)) == 64 + 6
    assert bytes_in(torch.zeros(8, 8).t()) == 256   # a view counts its elements
    assert bytes_in([]) == 0


def test_samples_are_the_first_tensors_leading_dimension():
    assert samples_in((torch.zeros(5, 3), torch.zeros(5))) == 5
    assert samples_in({"img": np.zeros((6, 2)), "y": [1] * 6}) == 6
    assert samples_in(["a", "b", "c"]) == 3              # a list of plain values: its items
    assert samples_in([[torch.zeros(4)], 1]) == 4         # nested: the first item's first tensor
    assert samples_in(torch.tensor(3.0)) == 1 and samples_in({}, None) is None
    looped: list = []
    looped.append(looped)
    assert samples_in(looped, None) is None               # a batch holding itself ends the walk
