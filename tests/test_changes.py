"""What changed since the previous result of the same problem (tuning/compare.py) and which result
is the previous one (store/history.previous): the nightly re-tune's question, as
``tune --fail-if-changed`` and ``retune`` both ask it. Unit tests: no trial runs."""

import json
import os

from autoloader import LoaderConfig, TunedConfig
from autoloader.search.policy import RATE_SHIFT, Thresholds
from autoloader.store.history import previous
from autoloader.store.records import StoredHardware
from autoloader.store.result import TuneResult
from autoloader.tuning.compare import DRIFTED, NEW_HARDWARE, UNCHANGED, compare
from autoloader.tuning.progress import since

KEY = "ds-n100-abc"


def tuned(workers: int, rate: float, fingerprint: str, pin: bool = True, cpus: int = 8) -> TunedConfig:
    config = LoaderConfig.make(64, workers, pin) if workers else LoaderConfig.make(64, 0, pin, None, False)
    hardware = {"fingerprint": fingerprint, "cpus": cpus, "cpu_model": "x", "memory_gib": 16, "gpus": []}
    return TunedConfig(config, rate, 0.02, 100.0, None, hardware, KEY, "cuda")


def record(t: TunedConfig, **extra) -> dict:
    return {**t.to_dict(), "measurement_format": 1, "trials": [], "finals": [], **extra}


def result(t: TunedConfig, **extra) -> TuneResult:
    return TuneResult.from_dict(record(t, **extra))


def stored(t: TunedConfig, where: str = "old/ds.json", **extra) -> TuneResult:
    return TuneResult.from_dict(record(t, **extra), where)


def test_same_settings_and_a_rate_within_the_noise_is_unchanged():
    c = compare(stored(tuned(8, 1000.0, "old")), result(tuned(8, 1000.0 * (1 + RATE_SHIFT * 0.9), "new")))
    assert not c.changes and not c.rate_shifted and not c.changed
    assert c.status == NEW_HARDWARE and not c.same_hardware and c.previous_hardware == "old"
    assert since(c).startswith("unchanged since old (old/ds.json): same settings; samples/s 1,000/s -> ")


def finals(*pairs) -> list[dict]:
    """A final's records: (TunedConfig, rates by round) each."""
    return [{"config": t.config.loader_kwargs(), "rates": list(r), "rounds": list(range(len(r)))} for t, r in pairs]


def test_a_different_setting_or_a_rate_past_the_noise_is_a_change():
    old, new = tuned(8, 1000.0, "box", pin=True), tuned(12, 1200.0, "box", pin=False)
    # The final measured the old pick beside the new one: the new read ahead in every round.
    c = compare(stored(old, "box/ds.json"), result(new, finals=finals((new, (1200, 1190, 1210)), (old, (1000,) * 3))))
    assert [(x.setting, x.before, x.after) for x in c.changes] == [("num_workers", 8, 12), ("pin_memory", True, False)]
    assert c.changed and c.same_hardware and c.status == DRIFTED
    assert "CHANGED since this hardware" in since(c) and "num_workers 8 -> 12" in since(c)
    # No paired round of the two: the change cannot be told from the noise, a tie.
    unpaired = compare(stored(old, "box/ds.json"), result(tuned(12, 1000.0, "box", pin=False)))
    assert unpaired.changes and unpaired.settings_tie and not unpaired.changed

    slower = compare(stored(tuned(8, 1000.0, "old")), result(tuned(8, 700.0, "new")))
    assert RATE_SHIFT < 0.3
    assert not slower.changes and slower.rate_shifted and slower.changed
    assert "(-30%, past the noise)" in since(slower)
    assert slower.to_dict()["changed"] is True and slower.to_dict()["rate_ratio"] == 0.7

    # Another pick, but the previous one was measured in this run's rounds within the tie: noise decided it.
    old, new = tuned(16, 1000.0, "box"), tuned(24, 1000.0, "box")
    then = stored(old, "box/ds.json")
    tie = compare(then, result(new, finals=finals((new, (1000, 990, 1010)), (old, (980, 985, 975)))))
    assert tie.changes and tie.settings_tie and not tie.changed and tie.status == UNCHANGED
    assert "(a tie: the rounds of this run cannot separate them; the previous settings read 980/s here)" in since(tie)
    assert since(tie).startswith("unchanged")
    behind = compare(then, result(new, finals=finals((new, (1000, 990, 1010)), (old, (900, 905, 895)))))
    assert not behind.settings_tie and behind.changed and behind.status == DRIFTED
    # The old pick read tonight is what the rate is judged by: one config read twice.
    assert behind.rate_ratio == 0.9 and "the previous settings read 900/s here" in since(behind)
    # A changed pick is no reason when the thresholds do not count picks.
    assert not compare(then, result(tuned(24, 1000.0, "box")), Thresholds(pick=False)).changed

    # From num_workers=0 the worker settings appear: each is named.
    c = compare(stored(tuned(0, 1000.0, "old")), result(tuned(4, 1000.0, "new")))
    assert {x.setting for x in c.changes} == {"num_workers", "prefetch_factor", "persistent_workers"}


def test_a_node_results_old_pick_reads_at_the_nodes_rate():
    """A node's trials list the slowest rank's rate; the comparison scales them to the node's."""
    old = tuned(4, 2000.0, "box-2rank")
    node = {"node": {"ranks": 2},
            "trials": [{"config": old.config.loader_kwargs(), "status": "ok", "samples_per_s": 990.0}]}
    c = compare(stored(old, "box-2rank/ds.json"), result(tuned(6, 2000.0, "box-2rank"), **node))
    assert c.old_pick_now == 1980.0 and c.settings_tie and not c.changed


def write(out, fingerprint, result, text=None, cpus=8):
    folder = os.path.join(out, fingerprint)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, KEY + ".json")
    with open(path, "w") as fh:
        fh.write(text if text is not None else json.dumps(result))
    return path


def here(cpus: int = 8, fingerprint: str = "here") -> StoredHardware:
    return StoredHardware(fingerprint, cpus, "x", 16, ())


def test_the_previous_result_is_this_hardwares_else_the_nearest_elsewhere(tmp_path):
    out = str(tmp_path)
    assert previous(out, here(), KEY) is None
    write(out, "far", record(tuned(4, 500.0, "far", cpus=64), finished_at="2026-12-01T10:00:00+00:00"))
    near_old = write(out, "near-old", record(tuned(6, 600.0, "near-old", cpus=8),
                                             finished_at="2026-11-30T10:00:00+00:00"))
    near_new = write(out, "near-new", record(tuned(6, 650.0, "near-new", cpus=8),
                                             finished_at="2026-12-01T09:00:00+00:00"))
    write(out, "broken", None, text="{not json")
    write(out, "alien", None, text='{"config": {"num_workers": 2}}')
    write(out, "no-hardware", dict(record(tuned(2, 100.0, "x")), hardware=None))
    write(out, "no-rate", dict(record(tuned(2, 100.0, "x")), samples_per_s=0))
    found = previous(out, here(), KEY)
    assert found.where == near_new and found.tuned.config.num_workers == 6, \
        "the nearest machine (CPU count), the newest among equals; unreadable results passed over"
    assert os.path.exists(near_old)
    mine = write(out, "here", record(tuned(8, 800.0, "here")))
    found = previous(out, here(), KEY)
    assert found.where == mine and found.tuned.samples_per_s == 800.0, "this hardware's result first, however old"
    assert previous(out, here(), "other-key") is None


def test_a_previous_result_measured_differently_is_not_called_unchanged(tmp_path):
    path = write(str(tmp_path), "box", dict(record(tuned(8, 1000.0, "box")), measurement_format=0))
    found = previous(str(tmp_path), here(fingerprint="box"), KEY)
    note = found.measured_differently()
    assert note and "format 0" in note
    c = compare(found, result(tuned(8, 1000.0, "box")))
    assert not c.changes and not c.rate_past(RATE_SHIFT) and c.changed and c.status == DRIFTED
    assert "not comparable: the stored result was measured with format 0" in since(c)
    assert c.to_dict()["not_comparable"] == note and found.where == path
