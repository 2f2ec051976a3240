"""What a dataset's heap is held in (NOTE [ A heap of buffers copies nothing ] in
autoloader/probe/growth.py): large buffers are counted once by their owner, and the walk gives up
where copy on read could be at work (many objects, an array of objects) or a mapped file is read.
Each is checked against a dataset built here; the growth stage runs for rows of objects and is
skipped for rows in an array (tests/test_growth_e2e.py tunes both)."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from autoloader.probe.growth import BUFFER_MIN, copies_nothing, held_in, with_growth
from autoloader.search.policy import GROWTH_MIN_DATASET

MIB = 2**20


class Held(Dataset):
    def __init__(self, **parts):
        self.__dict__.update(parts)

    def __len__(self):
        return 1024

    def __getitem__(self, index):
        return torch.zeros(4)


def test_buffers_are_counted_once_by_their_owner():
    pool = np.zeros((8, MIB), dtype=np.uint8)              # 8 MiB it owns
    tensor = torch.zeros(MIB, dtype=torch.float32)          # 4 MiB
    dataset = Held(pool=pool, view=pool[2:4], again=pool, tensor=tensor, half=tensor[: MIB // 2],
                   shared=torch.from_numpy(pool[0]), blob=b"x" * (2 * MIB), labels=list(range(100)))
    held = held_in(dataset)
    assert held is not None
    # pool once (its views and the tensor made from it add nothing: the tensor's storage is the
    # pool's row, counted by its address apart), the tensor once, the blob.
    assert 8 * MIB + 4 * MIB + 2 * MIB <= held.buffer_bytes <= 8 * MIB + 4 * MIB + 2 * MIB + MIB
    assert held.objects >= 100    # the labels are objects


def test_small_bytes_are_objects_not_buffers():
    held = held_in(Held(names=[bytes([i]) * 100 for i in range(50)], big=b"b" * BUFFER_MIN))
    assert held is not None and held.buffer_bytes == BUFFER_MIN and held.objects >= 50


def test_the_walk_gives_up_where_copy_on_read_can_be_at_work(tmp_path):
    assert held_in(Held(rows=[{"id": i} for i in range(2000)]), limit=1000) is None
    assert held_in(Held(rows=np.array([{"id": i} for i in range(10)], dtype=object))) is None
    path = tmp_path / "rows.bin"
    np.zeros(4096, dtype=np.uint8).tofile(path)
    assert held_in(Held(rows=np.memmap(path, dtype=np.uint8, mode="r"))) is None
    assert held_in(Held(rows=np.memmap(path, dtype=np.uint8, mode="r")[10:20])) is None


def test_classes_modules_and_functions_are_not_walked():
    """They reach the whole interpreter: the walk of a dataset with a transform and a module in its
    attributes stays within the dataset."""
    held = held_in(Held(transform=lambda x: x, module=np, kind=Held, rows=np.ones(MIB // 8)), limit=500)
    assert held is not None and held.buffer_bytes == MIB


def test_the_floor_is_what_the_buffers_leave():
    dataset = Held(pool=np.zeros(32 * MIB, dtype=np.uint8), names=["a"] * 10)
    assert copies_nothing(dataset, 33 * MIB, GROWTH_MIN_DATASET)
    assert not copies_nothing(dataset, 32 * MIB + GROWTH_MIN_DATASET, GROWTH_MIN_DATASET)
    assert not copies_nothing(dataset, None, GROWTH_MIN_DATASET)


def test_the_stage_is_not_run_for_a_heap_of_buffers():
    """``with_growth`` hands the profile back as it was, without starting the stage's workers."""
    class Profile:   # only what with_growth reads before it measures
        sample_median_s, sample_bytes = 0.001, 16

    profile = Profile()
    dataset = Held(pool=np.zeros(32 * MIB, dtype=np.uint8))
    calls = []
    assert with_growth(profile, dataset, {}, 33 * MIB, lambda: calls.append(1)) is profile
    assert calls == [1]
