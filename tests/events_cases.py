"""One event of every type, built from real records, for tests/test_events.py."""

from __future__ import annotations

from autoloader import events as ev
from autoloader.fleet.retune import Outcome, WarmPlan
from autoloader.probe.protocol import DatasetInfo
from autoloader.search.config import TunedConfig
from autoloader.search.results import OK, BusySpan, MachineLoad, TrialResult
from autoloader.search.profile import Profile
from autoloader.search.space import LoaderConfig
from autoloader.search.model_first import WarmStart
from autoloader.search.paired import Ratio
from autoloader.tuning.compare import Comparison
from autoloader.store.result import TuneResult

PICK = LoaderConfig.make(16, 3, False, 2, True)
RULE = LoaderConfig.make(16, 1, False, 2, True)
INFO = DatasetInfo(4096, 0.0012, 3072, 200 << 20, 220 << 20)
TRIAL = TrialResult(PICK, OK, samples_per_s=1234.0, rel_interval=0.021, wait_fraction=0.25, others_cpus=1.6)
FAILED = TrialResult(RULE, "failed", cause="dataset_error", error="boom")
TUNED = TunedConfig(PICK, 1234.0, 0.021, 400.0, None, {"fingerprint": "box", "cpus": 2}, "ds-key", "cpu")
PROFILE = Profile(batch_size=16, sample_s=(0.001,) * 64, collate_s=0.0005, sample_bytes=64, recv_s=0.0002,
                  pin_s=None, h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.002, startup_s=0.2,
                  worker_pss=100 << 20, cpus=2, epoch_batches=256, seconds=2.0, sample_cpu_share=0.9,
                  others_cpus=1.5)
LOAD = MachineLoad(2, 1.4, 1.8, 0.0, busy_spans=(BusySpan(1, 2, 1.5),))
RESULT = TuneResult(TUNED, (TRIAL,), (), "/r.json", "/r.py", "sqlite://", 12.0, 0, 0, rule=RULE)


def examples() -> list[ev.Event]:
    """Every event type once (twice where a branch of its words differs)."""
    drift = Comparison("changed", reasons=("samples/s -12%",))
    warm = WarmPlan(WarmStart(PICK, 1234.0, 0.021, may_stop=True), "/old.json")
    return [
        ev.TuneStarted("ds-key", INFO, resumed=3, retried=1, code_changed=2, crashed_once=1, invalid=1,
                       environment=1, stale=2, device="cpu", cpus=2, budget=60.0, max_memory=8 << 30,
                       storage="sqlite://"),
        ev.TuneStarted("ds-key", INFO, cpus=1, ranks=2, budget=30.0, max_memory=8 << 30),
        ev.TrialsUnstored("the study stopped taking writes (disk full)"),
        ev.FleetPushed("pushed 3 trials to the fleet storage"),
        ev.Profiled(PROFILE, cpus=2, busy=0.5),
        ev.Profiled(PROFILE, error="the profile's batch raised"),
        ev.RuleRetried(FAILED),
        ev.TrialDone(1, 6, TRIAL, TRIAL, 3.0, cpus=2),
        ev.TrialDone(2, 6, FAILED, TRIAL, 4.0, again=True),
        ev.FinalRound(1, 3, (("16-3", (1200.0,)), ("16-1", ()))),
        ev.BusyRecheck(("16-3", "16-1"), LOAD),
        ev.TuneDone(RESULT),
        ev.ResultReused("/home/r.json", TUNED),
        ev.ResultNotReused("/home/r.json: measured with format 0"),
        ev.SettingsApplied(TUNED, reused=False, path="/home/r.json"),
        ev.SettingsApplied(TUNED, reused=True, path="/home/r.json", to="the DataLoader returned"),
        ev.SettingsApplied(TUNED, reused=False, path=None, to="the Trainer's TrainingArguments (dataloader_*)"),
        ev.WaitingForLock(4242, "/home"),
        ev.WaitingForLock(None, "/home", then="measuring on its own"),
        ev.WaitingForTrialStart(31.0, 120.0, clipped=True),
        ev.WaitingForRank(1, 2, "trial", 45.0, 300.0, state="stopped"),
        ev.RetuneStarted(1, 2, "imagenet"),
        ev.WarmStarted("imagenet", "ds-key", warm),
        ev.Retuned(Outcome("imagenet", "changed", drift=drift, early_stop=True)),
        ev.Retuned(Outcome("imagenet", "failed", error="building the dataset raised OSError: gone\nmore")),
        ev.NotInRun("an IterableDataset has no order to read in segments"),
        ev.InRunStarted("ds-key", PICK, 0.007),
        ev.InRunStarted("ds-key", RULE),
        ev.SegmentRead(0, PICK, 1234.0, 0.25, round=2, best=RULE),
        ev.InRunFollowing("ds-key", 4242, "/home", PICK),
        ev.InRunFollowing("ds-key", None, "/home", RULE),
        ev.InRunAdopted(1, RULE, "/home/r.json"),
        ev.InRunNotAdopted(1, PICK, "/home/r.json", 3 * 2**30, 2 * 2**30, RULE),
        ev.InRunExploring(0, 3, 2, RULE),
        ev.InRunSettled(RULE, "no step left", "/home/r.json"),
        ev.InRunDone(2, (PICK, RULE), PICK, RULE, 4, 1.5, "no step left", RULE, Ratio(1.12, 1.05, 1.19, 4), "the start",
                     1234.0, 0.05, 60.0, 1.5, path="/home/r.json"),
        ev.InRunDone(1, (PICK,), PICK, RULE, 0, 1.5, "the run's epochs are read", PICK, epoch_s=30.0,
                     tuning_cost_s=-0.4, refused=(RULE, RULE), path=None),
    ]
