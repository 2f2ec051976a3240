"""A dataset for the fleet report beside autoloader's two demo datasets: samples that wait, as
reads from a network file system or an object store do (a sleep stands in for the wait)."""

import time

import torch
from torch.utils.data import Dataset


class RemoteReads(Dataset):
    """Each sample waits ``wait_s`` and returns a small tensor: workers overlap the waits."""

    def __init__(self, length: int = 8_192, wait_s: float = 0.004):
        self.length, self.wait_s = length, wait_s

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        time.sleep(self.wait_s)
        return torch.full((64,), float(index))


def remote_reads() -> RemoteReads:
    return RemoteReads()
