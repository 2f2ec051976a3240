"""Synthetic pipelines for the explanation's tests: profiles of each bottleneck class, and a whole
stored result built from synthetic records (no trial runs), in ``TuneResult.to_dict``'s shape.

The figures here are made up by code to exercise the explanation, and say so (the dataset is
named ``synthetic``); no test reads them as measurements of anything.
"""

from __future__ import annotations

import random

from autoloader.explain.evidence import Evidence
from autoloader.search.choice import Finalist
from autoloader.search.config import find_knee
from autoloader.search.model import Calibration, Model
from autoloader.search.profile import Profile
from autoloader.search.results import CONSTRAINT, OK, TrialResult
from autoloader.search.space import LoaderConfig

GIB = 2**30


def profile(sample_s=0.002, step_s=0.001, recv_s=0.0002, pin_s=0.0005, h2d=0.0003, pageable=0.002, cpus=8,
            batch_size=32, sample_bytes=4096, cpu_share=1.0, epoch_batches=1000, collate_s=0.0005, tail=None,
            device="cuda") -> Profile:
    rng = random.Random(0)
    costs = [sample_s * rng.uniform(0.9, 1.1) for _ in range(256)]
    if tail:
        share, cost = tail
        costs = [cost if rng.random() < share else c for c in costs]
    cuda = device == "cuda"
    return Profile(batch_size=batch_size, sample_s=tuple(costs), collate_s=collate_s, sample_bytes=sample_bytes,
                   recv_s=recv_s, pin_s=pin_s if cuda else None, h2d_pinned_s=h2d if cuda else None,
                   h2d_pageable_s=pageable if cuda else None, step_s=step_s, startup_s=0.2, worker_pss=100 << 20,
                   cpus=cpus, epoch_batches=epoch_batches, seconds=2.0, sample_cpu_share=cpu_share)


def model_pick(p: Profile, device: str) -> LoaderConfig:
    """The config the model rates best along the worker ladder (both pinnings on CUDA): the pick a
    tune on this profile would start from."""
    model = Model(p, device)
    cpus = int(p.cpus)
    counts = list(range(0, cpus + 1)) + list(range(cpus + max(1, cpus // 2), 4 * cpus + 1, max(1, cpus // 2)))
    configs = [LoaderConfig.make(p.batch_size, n, pin) for pin in ((True, False) if device == "cuda" else (False,))
               for n in counts]
    return max(configs, key=lambda c: (round(model.predict(c).samples_per_s, 6), [-x for x in c.cost()]))


def evidence(p: Profile, device: str, pick: LoaderConfig | None = None, **kw) -> Evidence:
    pick = pick or model_pick(p, device)
    rate = kw.pop("samples_per_s", None) or Model(p, device).predict(pick).samples_per_s
    return Evidence(p, Calibration(), device, pick, rate, cpus=int(p.cpus), **{"step_given": True, **kw})


def kept_out(config: LoaderConfig, cause: str = "predicted_memory", where: str = "host") -> TrialResult:
    error = {"host": "predicted 20.00 GiB host memory > 8.00 GiB ceiling",
             "shm": "predicted 9.00 GiB in /dev/shm > 2.00 GiB free"}.get(where, "CUDA out of memory")
    return TrialResult(config, CONSTRAINT if cause == "predicted_memory" else "failed", cause=cause, error=error)


# Each bottleneck class, as a profile (and a pick, and trials, where the class needs them).
def case(kind: str) -> Evidence:
    if kind == "compute":
        return evidence(profile(sample_s=0.0002, step_s=0.05), "cuda")
    if kind == "input/cores":
        return evidence(profile(sample_s=0.002, cpus=4, step_s=0.0001, device="cpu"), "cpu")
    if kind == "input/workers":
        # Samples that wait on I/O 95% of their time: even the most workers the search tries leave cores idle.
        return evidence(profile(sample_s=0.02, cpus=2, cpu_share=0.05, step_s=0.0001, device="cpu"), "cpu")
    if kind == "input/main":
        # A 96 MiB batch: workers make it quickly, the pin thread's receive and pin take 52 ms.
        return evidence(profile(sample_s=0.002, recv_s=0.04, pin_s=0.012, h2d=0.004, pageable=0.04,
                                sample_bytes=3 << 20, step_s=0.0001, cpus=16), "cuda")
    if kind == "input/copy":
        return evidence(profile(sample_s=0.0001, recv_s=0.0005, pin_s=0.0005, h2d=0.03, pageable=0.04,
                                sample_bytes=1 << 20, step_s=0.0001, cpus=16), "cuda")
    if kind == "balanced":
        # Four cores make about as many batches as the step takes, and the loop measured waiting
        # 10% of the time: both hold it (a loop that does not wait is the step's: "fed").
        p = profile(sample_s=0.002, cpus=4, step_s=0.018, device="cpu")
        pick = model_pick(p, "cpu")
        rate = Model(p, "cpu").predict(pick).samples_per_s
        return evidence(p, "cpu", pick, finals=(Finalist(pick, (rate, rate), (0.1, 0.1)),))
    if kind == "fed":
        # The case: a 1.9 s step on 2 CPUs whose loader is predicted to supply about as much
        # (7/s against 8/s), while the final measured the loop waiting 2%: the step holds it.
        p = profile(sample_s=0.28, batch_size=16, cpus=2, step_s=1.9, device="cpu", sample_bytes=600_000)
        pick = model_pick(p, "cpu")
        return evidence(p, "cpu", pick, samples_per_s=7.1,
                        finals=(Finalist(pick, (7.1, 7.0, 7.2), (0.01, 0.02, 0.015)),))
    if kind.startswith("memory/"):
        where = kind.split("/")[1]
        p = profile(sample_s=0.002, cpus=8, step_s=0.0001, device="cuda")
        pick = LoaderConfig.make(32, 2, True)
        cause = {"host": "predicted_memory", "shm": "predicted_memory", "device": "cuda_oom"}[where]
        return evidence(p, "cuda", pick, trials=(kept_out(LoaderConfig.make(32, 7, True), cause, where),))
    raise ValueError(kind)


def synthetic_result(path: str = "/nowhere/synthetic.json") -> dict:
    """A whole result as ``TuneResult.to_dict`` writes it, from synthetic records: a CUDA pipeline
    held by the main process, the trials a model-first search would run (one kept out by memory,
    one stopped early), an interleaved final of the pick and the rule, and the run's timeline."""
    p = profile(sample_s=0.002, recv_s=0.04, pin_s=0.012, h2d=0.004, pageable=0.04, sample_bytes=3 << 20,
                step_s=0.0001, cpus=16)
    model = Model(p, "cuda")
    pick = model_pick(p, "cuda")
    rule = LoaderConfig.make(32, 15, True)
    made = {}

    def trial(config, factor, wait, pruned=False, **extra):
        rate = model.predict(config).samples_per_s * factor
        made[config] = TrialResult(config, OK, samples_per_s=rate, steady_samples_per_s=rate, rel_interval=0.04,
                                   wait_fraction=wait, peak_pss_bytes=int((1.2 + 0.25 * config.num_workers) * GIB),
                                   peak_host_bytes=int((1.0 + 0.2 * config.num_workers) * GIB),
                                   peak_shm_bytes=int(0.1 * GIB * config.num_workers), gpu_peak_bytes=200 << 20,
                                   batches=200, window_s=2.0, seconds=4.0 + config.num_workers * 0.2, pruned=pruned,
                                   **extra)
        return made[config]

    trials = [trial(LoaderConfig.make(32, 0, True), 0.97, 0.9), trial(pick, 1.03, 0.6), trial(rule, 0.98, 0.62),
              trial(LoaderConfig.make(32, 4, True), 0.9, 0.7, pruned=True),
              kept_out(LoaderConfig.make(32, 64, True, prefetch_factor=16))]
    finals = [Finalist(pick, (made[pick].samples_per_s * 1.01, made[pick].samples_per_s * 0.99), (0.61, 0.6),
                       made[pick], (0, 1)),
              Finalist(rule, (made[rule].samples_per_s, made[rule].samples_per_s * 0.98), (0.63, 0.62), made[rule],
                       (0, 1))]
    curve = [(n, model.predict(pick.replace(num_workers=n) if n else LoaderConfig.make(32, 0, True)).samples_per_s)
             for n in range(0, 17)]
    timeline, at = [["set-up", 0.0, 3.0, None], ["profile", 3.0, 5.0, None]], 5.0
    for t in trials:
        timeline.append(["burst", at, at + t.seconds, t.config.key])
        at += t.seconds
    for _ in range(2):
        for f in finals:
            timeline.append(["final", at, at + 3.0, f.config.key])
            at += 3.0
    rate = finals[0].median
    return {"format": 2, "config": pick.loader_kwargs(), "samples_per_s": rate, "rel_interval": 0.04,
            "baseline_samples_per_s": made[LoaderConfig.make(32, 0, True)].samples_per_s,
            "knee": find_knee(curve).to_dict(),
            "hardware": {"cpus": 16, "cpu_model": "synthetic", "memory_gib": 64, "gpus": ["synthetic GPU"],
                         "fingerprint": "synthetic-1x-16cpu-64g-00000000"},
            "dataset_key": "synthetic-n1000-0000000000", "device": "cuda", "path": path,
            "snippet_path": path[:-5] + ".py", "tune_seconds": at + 1.0, "trials": [t.to_dict() for t in trials],
            "finals": [f.to_dict() for f in finals], "profile": p.to_dict(), "calibration": Calibration().to_dict(),
            "predicted": model.predict(pick).to_dict(), "rule": rule.loader_kwargs(),
            "rule_samples_per_s": finals[1].median, "reorder_gain": 0.0, "faults": {"constraint": 1},
            "dataset": {"name": "synthetic", "length": 1000, "content": None, "version": None},
            "inputs": {"step": "synthetic:step", "allow_reorder": False, "max_memory": 8 * GIB,
                       "shm_free": 16 * GIB, "timeline": timeline},
            "measurement_format": 2, "autoloader_version": "test", "finished_at": "2026-12-01T00:00:00+00:00"}
