"""The quick profile an in-run tune starts from, and the model's guess it climbs from.

# NOTE [ The quick profile ]
# The full profile (probe/profiler.py) runs in a trial process for seconds: too long before a
# training loop's first batch. In-run tuning reads only what the loop cannot show before its first
# segment, here in the caller's process with one intra-op thread (as a worker runs): a few
# samples' cost (at most QUICK_SECONDS) and the share of it on a CPU (the thread's time: a sample
# that waits on storage or a sleep takes less), one collate, a sample's bytes. The rest of the model's
# inputs it does not measure: the receive is estimated from the batch's bytes (RECV_BYTES_PER_S),
# and from a busy worker (NOTE [ A busy worker's receive ] in search/model.py) a switch interval
# (``sys.getswitchinterval``) more for each of the batch's tensors, scaled by the samples' share on
# a CPU: each tensor's handle is passed by a thread of the worker that needs its interpreter lock,
# which a worker making samples in Python holds until the interval asks it back; a worker's start
# is START_GUESS_S, and the step is not known yet. These guesses only choose where the climb
# starts and, once the start's reading has read the step, how far a step up may reach (``aim``:
# NOTE [ The climb ] in schedule.py); the loop measures every config read. When the first sample
# alone takes past QUICK_SECONDS the profile stops there and the rule starts.
# Nor are the copy to the device and the pinning read: where the device offers pinning the start
# pins (where the memory forecast lets it), as the rule does and PyTorch advises for a CUDA loop:
# with the step unknown the model sees the receive alone in the main process, and cannot weigh the
# pin thread that takes the receive off the step's process. The climb's last step reads unpinned.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from typing import Any, Callable

from ..batches import bytes_in, tensors_in
from ..search.model import Model
from ..search.model_first import ModelFirst, heuristic_config
from ..search.profile import Profile
from ..search.policy import MAX_WORKERS_PER_CPU
from ..search.settings import PIN, PREFETCH
from ..search.space import LoaderConfig, SearchSpace, search_space

QUICK_SECONDS = 1.0
QUICK_SAMPLES = 64
RECV_BYTES_PER_S = 2e9
RECV_FIXED_S = 2e-4
START_GUESS_S = 0.15
# The deepest prefetch a tune in the run reads (NOTE [ Segments of the epoch ] in schedule.py).
MAX_PREFETCH = 4


def quick_profile(dataset: Any, batch_size: int, collate: Callable, cpus: int,
                  seconds: float = QUICK_SECONDS) -> Profile | None:
    """The quick profile (NOTE [ The quick profile ]), or None when not even a batch's worth of
    samples fits in ``seconds`` (the rule starts then). Indices are drawn at random, so no sample
    is read twice into the cache ahead of the loop's own order more than the loop would."""
    import torch

    length = len(dataset)
    rng = random.Random(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    began = time.perf_counter()
    costs: list[float] = []
    samples: list[Any] = []
    cpu_s = 0.0
    try:
        while len(costs) < QUICK_SAMPLES and (time.perf_counter() - began < seconds or len(costs) < 2):
            t0, c0 = time.perf_counter(), time.thread_time()
            sample = dataset[rng.randrange(length)]
            costs.append(time.perf_counter() - t0)
            cpu_s += time.thread_time() - c0
            if len(samples) < batch_size:
                samples.append(sample)
            if time.perf_counter() - began > seconds and len(costs) >= 2:
                break
        t0 = time.perf_counter()
        batch = collate(samples)
        collate_s = (time.perf_counter() - t0) * batch_size / len(samples)
    finally:
        torch.set_num_threads(threads)
    cost_s = sum(costs)
    sample_bytes = max(1, bytes_in(batch) // len(samples))
    batch_bytes = sample_bytes * batch_size
    cpu_share = min(1.0, cpu_s / cost_s) if cost_s > 0 else 1.0
    recv_s = RECV_FIXED_S + batch_bytes / RECV_BYTES_PER_S
    busy_s = recv_s + len(tensors_in(batch)) * sys.getswitchinterval() * cpu_share
    return Profile(batch_size=batch_size, sample_s=tuple(costs), collate_s=collate_s, sample_bytes=sample_bytes,
                   recv_s=recv_s, recv_busy_s=busy_s, pin_s=None, h2d_pinned_s=None,
                   h2d_pageable_s=None, step_s=0.0, startup_s=START_GUESS_S, worker_pss=None, cpus=cpus,
                   epoch_batches=-(-length // batch_size), seconds=time.perf_counter() - began,
                   recv_fixed_s=RECV_FIXED_S, sample_cpu_share=cpu_share)


@dataclasses.dataclass
class Proposer:
    """The model's start for this loop, before the step is known, and the space the climb may
    cover. ``fits(config)``: its memory is within the forecast."""

    profile: Profile | None
    space: SearchSpace
    cpus: int
    device: str
    fits: Callable[[LoaderConfig], bool]

    @property
    def rule(self) -> LoaderConfig:
        return heuristic_config(self.space, self.cpus)

    def _strategy(self, step_s: float) -> ModelFirst:
        profile = dataclasses.replace(self.profile, step_s=step_s, step_samples=())
        return ModelFirst(self.space, Model(profile, self.device), self.cpus, fits=lambda c, h: self.fits(c))

    def start(self) -> LoaderConfig:
        """The model's guess with the step not yet known, its workers' CPU time within the CPUs (a
        guess of the loader alone would ask for more than the loop leaves them; workers whose
        samples mostly wait take little), pinned where the device offers pinning; the rule without a
        profile."""
        if self.profile is None:
            return self.rule
        guess = self._guess(0.0, idle=False)
        return self._pinned(guess) if guess is not None else self.rule

    def aim(self, reading: Any) -> LoaderConfig | None:
        """The model's guess with the step read (``reading``'s, a schedule.Reading), the first step
        up's reach (NOTE [ The climb ] in schedule.py); None without a profile. On an accelerator,
        whose step leaves the CPUs to the workers, workers the model sees idle (waiting on the
        in-order queue, or for the loop to receive) count for the CPU time they take."""
        if self.profile is None or not reading.batches:
            return None
        return self._guess(reading.step_s, idle=self.device != "cpu")

    def _guess(self, step_s: float, idle: bool) -> LoaderConfig | None:
        """The model's pick with the step ``step_s``, of the configs whose workers' CPU time is
        within the CPUs: each worker's the samples' share on a CPU, and with ``idle`` the share of
        the time the model sees it busy."""
        strategy = self._strategy(step_s)
        share = max(self.profile.sample_cpu_share, 1.0 / MAX_WORKERS_PER_CPU)

        def demand(p) -> float:
            busy = p.workers_busy if idle and p.workers_busy is not None else 1.0
            return p.config.num_workers * share * busy

        within = [p for p in strategy.predictions([]) if demand(p) <= self.cpus]
        return strategy.pick(within).config if within else None

    def _pinned(self, config: LoaderConfig) -> LoaderConfig:
        """``config`` pinned where the device offers pinning and the forecast lets it (NOTE [ The
        quick profile ])."""
        if config.pin_memory or not config.num_workers or True not in self.space.values(PIN):
            return config
        pinned = config.replace(pin_memory=True)
        return pinned if self.fits(pinned) else config


def space_for(batch_size: int, cpus: int, device: str) -> SearchSpace:
    """What in-run tuning may vary: the search's space at one batch size, its prefetch no deeper
    than MAX_PREFETCH (NOTE [ Segments of the epoch ] in schedule.py: a reading holds its queue's
    depth)."""
    space = search_space((batch_size,), cpus, device)
    prefetch = tuple(p for p in space.values(PREFETCH) if p <= MAX_PREFETCH) or (min(space.values(PREFETCH)),)
    return SearchSpace(space.batch_sizes, space.max_workers, unlocked=space.unlocked,
                       **{**dict(space.choices), PREFETCH.name: prefetch})

