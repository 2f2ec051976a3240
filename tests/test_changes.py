"""What changed since the last result for the same problem: the nightly re-tune's question."""

import json
import os

from autoloader import LoaderConfig, TunedConfig
from autoloader.search.policy import RATE_SHIFT
from autoloader.tuning.compare import compare, previous_result
from autoloader.tuning.progress import since


def tuned(workers: int, rate: float, fingerprint: str, pin: bool = True) -> TunedConfig:
    config = LoaderConfig.make(64, workers, pin) if workers else LoaderConfig.make(64, 0, pin, None, False)
    return TunedConfig(config, rate, 0.02, 100.0, None, {"fingerprint": fingerprint}, "ds-n100-abc", "cuda")


def test_same_settings_and_a_rate_within_the_noise_is_unchanged():
    c = compare(tuned(8, 1000.0, "old"), tuned(8, 1000.0 * (1 + RATE_SHIFT * 0.9), "new"), "old/ds.json")
    assert not c.changes and not c.rate_shifted and not c.changed
    assert not c.same_hardware and c.previous_hardware == "old"
    assert since(c).startswith("unchanged since old (old/ds.json): same settings; samples/s 1,000/s -> ")


def test_a_different_setting_or_a_rate_past_the_noise_is_a_change():
    c = compare(tuned(8, 1000.0, "box", pin=True), tuned(12, 1000.0, "box", pin=False), "box/ds.json")
    assert [(x.setting, x.before, x.after) for x in c.changes] == [("num_workers", 8, 12), ("pin_memory", True, False)]
    assert c.changed and c.same_hardware
    assert "CHANGED since this hardware" in since(c) and "num_workers 8 -> 12" in since(c)

    slower = compare(tuned(8, 1000.0, "old"), tuned(8, 700.0, "new"), "old/ds.json")
    assert RATE_SHIFT < 0.3
    assert not slower.changes and slower.rate_shifted and slower.changed
    assert "(-30%, past the noise)" in since(slower)
    assert slower.to_dict()["changed"] is True and slower.to_dict()["rate_ratio"] == 0.7

    # Another pick, but the previous one was measured in this run within the tie: noise decided it.
    tie = compare(tuned(16, 1000.0, "box"), tuned(24, 1000.0, "box"), "box/ds.json", previous_pick_now=980.0)
    assert tie.changes and tie.settings_tie and not tie.changed
    assert "(a tie: the previous settings read 980/s here)" in since(tie) and since(tie).startswith("unchanged")
    behind = compare(tuned(16, 1000.0, "box"), tuned(24, 1000.0, "box"), "box/ds.json", previous_pick_now=900.0)
    assert not behind.settings_tie and behind.changed

    # From num_workers=0 the worker settings appear: each is named.
    c = compare(tuned(0, 1000.0, "old"), tuned(4, 1000.0, "new"), "old/ds.json")
    assert {x.setting for x in c.changes} == {"num_workers", "prefetch_factor", "persistent_workers"}


def write(out, fingerprint, result, mtime=None, text=None):
    folder = os.path.join(out, fingerprint)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "ds-n100-abc.json")
    with open(path, "w") as fh:
        fh.write(text if text is not None else json.dumps(result.to_dict()))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_the_previous_result_is_this_hardwares_else_the_newest_elsewhere(tmp_path):
    out = str(tmp_path)
    assert previous_result(out, "here", "ds-n100-abc") is None
    write(out, "older", tuned(4, 500.0, "older"), mtime=1_000_000)
    newer = write(out, "newer", tuned(6, 600.0, "newer"), mtime=2_000_000)
    write(out, "newest-but-broken", None, mtime=3_000_000, text="{not json")
    write(out, "newest-but-alien", None, mtime=2_500_000, text='{"config": {"num_workers": 2}}')
    no_hardware = dict(tuned(2, 100.0, "x").to_dict(), hardware=None)
    write(out, "no-hardware", None, mtime=2_600_000, text=json.dumps(no_hardware))
    no_rate = dict(tuned(2, 100.0, "x").to_dict(), samples_per_s=0)
    write(out, "no-rate", None, mtime=2_700_000, text=json.dumps(no_rate))
    path, found = previous_result(out, "here", "ds-n100-abc")
    assert path == newer and found.config.num_workers == 6, "unreadable results are passed over"
    mine = write(out, "here", tuned(8, 800.0, "here"), mtime=500_000)
    path, found = previous_result(out, "here", "ds-n100-abc")
    assert path == mine and found.samples_per_s == 800.0, "this hardware's result first, however old"
    assert previous_result(out, "here", "other-key") is None


def test_a_previous_result_measured_differently_is_not_called_unchanged(tmp_path):
    from autoloader.tuning.compare import format_note

    path = write(str(tmp_path), "box", None, text=json.dumps(dict(tuned(8, 1000.0, "box").to_dict(),
                                                                   measurement_format=0)))
    note = format_note(path)
    assert note and "format 0" in note
    c = compare(tuned(8, 1000.0, "box"), tuned(8, 1000.0, "box"), path, measured_differently=note)
    assert not c.changes and not c.rate_shifted and c.changed
    assert "not comparable: the stored result was measured with format 0" in since(c)
    assert c.to_dict()["measured_differently"] == note
