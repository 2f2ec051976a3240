"""The memory prediction that keeps a config from being run when it would break the ceiling:
it must predict in the guard's own measure (PSS), or a breach is found only by running it."""

from autoloader.search.memory import forecast_peak
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig

MIB = 2**20
SAMPLE = 1024  # bytes a sample


def in_flight(config: LoaderConfig) -> int:
    return (config.num_workers * config.prefetch_factor + 2) * SAMPLE * config.batch_size


def test_predicts_in_pss_from_the_trials_pss():
    # The runner holds 100 MiB of its own and 300 MiB it shares with its forked workers: USS
    # sees 100 MiB, PSS (what the guard compares with --max-memory) 400 MiB. Each worker adds
    # 30 MiB of its own and 20 MiB of its share.
    two = LoaderConfig.make(16, 2, False, 2, True)
    trial = TrialResult(two, OK, samples_per_s=1.0, peak_host_bytes=100 * MIB + 2 * 30 * MIB + in_flight(two),
                        peak_pss_bytes=400 * MIB + 2 * 50 * MIB + in_flight(two))
    eight = LoaderConfig.make(16, 8, False, 2, True)
    f = forecast_peak(eight, 100 * MIB, 400 * MIB, SAMPLE, [trial])
    host, shm = f.host_bytes, f.shm_bytes
    assert host == 400 * MIB + 8 * 50 * MIB + in_flight(eight)
    assert shm == 8 * 2 * SAMPLE * 16


def test_a_trial_stored_before_pss_counts_by_its_uss():
    two = LoaderConfig.make(16, 2, False, 2, True)
    old = TrialResult.from_dict({k: v for k, v in TrialResult(
        two, OK, samples_per_s=1.0, peak_host_bytes=100 * MIB + 2 * 30 * MIB + in_flight(two)).to_dict().items()
        if k != "peak_pss_bytes"})
    assert old.peak_pss_bytes is None
    eight = LoaderConfig.make(16, 8, False, 2, True)
    host = forecast_peak(eight, 100 * MIB, 400 * MIB, SAMPLE, [old]).host_bytes
    assert host == 400 * MIB + 8 * 30 * MIB + in_flight(eight)

