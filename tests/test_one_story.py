"""Issue 52: one run, one story. Each figure is computed once, and every surface (the table, the
verdict, the report page, the JSON) renders that one value; the page carries the table's caveats;
advice fits its object; the install check names the one fix.

The results here are built from synthetic records (tests/explain_cases.py), no trial runs.
"""

from __future__ import annotations

from autoloader.events.lines import cpus, others_text


def test_plurals_of_cpus():
    assert cpus(1) == "1 CPU" and cpus(2) == "2 CPUs" and cpus(1.5) == "1.5 CPUs"
    assert others_text(0.5, 1) == "other processes used 0.5 of 1 CPU"


# -- the install path: a torch and a torchvision built for different devices or releases --------

from autoloader import demo  # noqa: E402

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def test_a_cpu_torch_beside_a_cuda_torchvision_gets_the_cpu_index_line():
    # The machine: the README's CPU index unreachable, a +cpu torch 2.13 stayed beside
    # PyPI's CUDA-built torchvision 0.28 (the right release): the fix is the device, not the release.
    error = "OSError: libc10_cuda.so: cannot open shared object file: No such file or directory"
    fix = demo.pair_fix("2.13.0+cpu", "0.28.0", error)
    assert fix.endswith(f"pip install --force-reinstall --no-deps 'torchvision==0.28.*' {CPU_INDEX}"), fix
    assert "CPU build" in fix
    # A tagged CUDA torchvision says so by its version alone.
    assert CPU_INDEX in demo.pair_fix("2.13.0+cpu", "0.28.0+cu128", "undefined symbol: x")
    # And a CUDA torch beside a CPU torchvision: its own index.
    assert demo.pair_fix("2.13.0+cu128", "0.28.0+cpu").endswith("--index-url https://download.pytorch.org/whl/cu128")


def test_another_release_gets_the_paired_release():
    fix = demo.pair_fix("2.13.0+cpu", "0.26.0+cpu", "operator torchvision::nms does not exist")
    assert "'torchvision==0.28.*'" in fix and CPU_INDEX in fix and "0.26" not in fix
    # Never the version already there as the whole fix: same release, same build, the pair again.
    same = demo.pair_fix("2.13.0", "0.28.0", "operator torchvision::nms does not exist")
    assert "'torch==2.13.0' 'torchvision==0.28.*'" in same


def test_the_demo_error_names_the_device_fix(monkeypatch):
    import sys
    import types

    import pytest

    from autoloader.errors import UsageError

    demo._torchvision_io.cache_clear()

    def operator(*args, **kwargs):
        raise OSError("libc10_cuda.so: cannot open shared object file: No such file or directory")

    io = types.SimpleNamespace(encode_jpeg=operator, decode_jpeg=operator)
    monkeypatch.setitem(sys.modules, "torchvision", types.SimpleNamespace(io=io, __path__=[]))
    monkeypatch.setitem(sys.modules, "torchvision.io", io)
    monkeypatch.setattr(demo.torch, "__version__", "2.13.0+cpu")
    monkeypatch.setattr(demo, "_installed", lambda name: "0.28.0")
    try:
        with pytest.raises(UsageError) as caught:
            demo.JpegImages(length=8)
    finally:
        demo._torchvision_io.cache_clear()
    text = str(caught.value)
    assert "torch 2.13.0+cpu, torchvision 0.28.0" in text and "libc10_cuda.so" in text
    assert f"'torchvision==0.28.*' {CPU_INDEX}" in text


# -- advice fitted to its object: the stream's library, the usable CPUs --------------------------

from autoloader.search.results import OK, TrialResult  # noqa: E402
from autoloader.search.shards import library, stream_lines, stream_record  # noqa: E402
from autoloader.search.space import LoaderConfig  # noqa: E402


def _stream_trial(workers: int, delivered: tuple[int, ...], duplicates: float | None) -> TrialResult:
    return TrialResult(LoaderConfig.make(32, workers, False), OK, samples_per_s=100.0, worker_delivered=delivered,
                       duplicate_share=duplicates)


def test_the_shard_advice_names_the_library_of_the_stream():
    wds = "webdataset.WebDataset's SimpleShardList"
    hf = "datasets.IterableDataset.n_shards"
    assert library(wds) == "webdataset" and library(hf) == "Hugging Face" and library("Files.num_shards") is None
    # Two shards, a search that would try 8 workers, on a machine of 4 usable CPUs.
    (web,) = stream_lines(stream_record(2, wds, 8, [_stream_trial(2, (320, 320), 0.0)], cpus=4))
    assert "webdataset" in web and ".tar" in web and "Hugging Face" not in web and "to_iterable_dataset" not in web
    assert "up to the 4 usable CPUs" in web
    (hug,) = stream_lines(stream_record(2, hf, 8, [_stream_trial(2, (320, 320), 0.0)], cpus=4))
    assert "Hugging Face: to_iterable_dataset(num_shards=K)" in hug and "webdataset" not in hug
    # Duplicates: each library's own way to shard by worker, and no other's.
    dup = stream_lines(stream_record(None, wds, 8, [_stream_trial(2, (640, 640), 1.0)]))[0]
    assert "split_by_worker" in dup and "split_dataset_by_node" not in dup
    dup = stream_lines(stream_record(None, hf, 8, [_stream_trial(2, (640, 640), 1.0)]))[0]
    assert "split_dataset_by_node" in dup and "split_by_worker" not in dup


def test_no_fix_for_more_workers_than_the_usable_cpus():
    # The webdataset: 2 shards on a machine of 2 usable CPUs. The search stopped at 2 of
    # the 8 it would try; a fix for more workers than 2 CPUs can run is no fix.
    record = stream_record(2, "webdataset.WebDataset's SimpleShardList", 8, [_stream_trial(2, (320, 320), 0.0)],
                           cpus=2)
    (line,) = stream_lines(record)
    assert "Fix:" not in line and "reshard" not in line and "no more are needed" in line
    assert record.findings[0].fix == ""
    from autoloader.search.shards import Stream

    assert Stream.from_dict(record.to_dict()) == record


def test_the_shards_say_their_library():
    from autoloader.probe.shards import shard_count

    class Stream:
        num_shards = 4

    Stream.__module__ = "datasets.iterable_dataset"
    assert shard_count(Stream()) == (4, "datasets.Stream.num_shards")
    Stream.__module__ = "my_streams"
    assert shard_count(Stream()) == (4, "Stream.num_shards")


# -- one run, one story: the table, the page and the JSON ----------------------------------------

import copy  # noqa: E402
import os  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402

from autoloader.explain import Evidence, ceiling, explain, verdict  # noqa: E402
from autoloader.explain.page import render_html, render_markdown  # noqa: E402
from autoloader.events.lines import line, rate  # noqa: E402
from autoloader.events.kinds import Profiled  # noqa: E402
from autoloader.store.result import TuneResult  # noqa: E402
from autoloader.tuning.progress import as_json, table  # noqa: E402
from explain_cases import synthetic_result  # noqa: E402


def _surfaces(data: dict) -> tuple[TuneResult, str, str, str, dict]:
    """The result read back as a stored one is, and what each surface says of it: the table, the
    page's markdown and HTML (plots left out), and the JSON."""
    result = TuneResult.from_dict(data)
    ex = explain(result)
    return (result, table(result), render_markdown(result, ex, {}), render_html(result, ex, {}),
            json.loads(as_json(result)))


def _busy_one_burst() -> dict:
    """A run beside CPU spinners (others took 12 of the 16 CPUs) whose pick rests on its burst
    alone: no final ran."""
    data = copy.deepcopy(synthetic_result())
    whole = TuneResult.from_dict(data)
    burst = next(t.samples_per_s for t in whole.trials if t.config == whole.config)
    data["finals"], data["samples_per_s"], data["rule_samples_per_s"] = [], burst, None
    data["load"] = {"usable_cpus": 16, "others_cpus": 12.0, "peak_others_cpus": 14.0, "steal_cpus": None,
                    "busy_trials": [{"first": 1, "last": 3, "others_cpus": 12.5}], "measured_s": 20.0}
    return data


def test_a_busy_unjudged_pick_carries_its_caveats_to_the_page():
    result, text, md, page, data = _surfaces(_busy_one_burst())
    caveats = dict((label, said) for label, said in data["explained"]["caveats"])
    basis, rule = caveats["samples/s from"], caveats["cpus-1 rule"]
    load = [said for label, said in data["explained"]["caveats"] if label == "machine load"]
    assert basis.startswith("from one burst, no final")
    assert "no round of it fit in the budget, so no interval" in rule
    assert load and "other processes used 12.0 of 16 CPUs" in load[0]
    assert any("a busy machine" in said for said in load)
    # One value each, told by every surface: the table's lines, the page's rows, the JSON's.
    for said in [basis, rule, *load]:
        assert said in text, said
        assert said in md.replace("\\|", "|"), said
        assert html_escape(said) in page, said
    assert data["load"]["busy"] is True and data["finals"] == []
    assert data["verdict"] == result.verdict and "no final" in result.verdict and "not judged" in result.verdict
    figure = rate(result.samples_per_s)
    assert f"samples/s            {figure}" in text and f"| samples/s (measured) | {figure}" in md
    assert data["samples_per_s"] == result.samples_per_s


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_a_ceiling_is_never_below_a_rate_the_run_measured():
    data = _busy_one_burst()
    # The profile under-timed its step: its term reads below the rates the bursts measured.
    best = max(t["samples_per_s"] for t in data["trials"] if t.get("samples_per_s") and not t.get("pruned"))
    data["profile"]["step_s"] = data["profile"]["batch_size"] / (best * 0.5)
    result, text, md, page, out = _surfaces(data)
    c = ceiling(Evidence.from_result(result))
    assert c.terms < best and c.value >= best and c.raised and c.gap <= 1.0
    assert out["explained"]["ceiling"]["ceiling"] == c.value and out["explained"]["ceiling"]["raised_to_measured"]
    sentence = c.sentence()
    assert f"of the ceiling, {rate(c.value)}: the highest rate this run measured" in sentence
    assert html_escape(sentence) in page and sentence in md
    # No "at most" a surface prints reads below what the run measured without saying so.
    v = verdict(Evidence.from_result(result))
    said = v.paragraph + " ".join(f.text for f in v.findings)
    for shown in re.findall(r"([0-9][0-9,.]*)/s at most(?! as profiled)", said):
        assert float(shown.replace(",", "")) >= result.samples_per_s * 0.99, v.paragraph


def test_one_step_time_from_the_profile_line_to_the_verdict():
    from dataclasses import replace

    from explain_cases import profile

    from autoloader.search.model import Calibration
    from autoloader.search.space import LoaderConfig

    # The issue's: the profile said "step 482.8 ms", the verdict "the step (726.7 ms a batch)".
    p = profile(sample_s=1e-5, step_s=0.4828, recv_s=1e-5, cpus=2, device="cpu", batch_size=32)
    pick = LoaderConfig.make(32, 1, False)
    calibration = Calibration(main=726.7 / 482.8, main_fits=3)
    ev = Evidence(p, calibration, "cpu", pick, 44.0, cpus=2, step_given=True,
                  trials=(TrialResult(pick, OK, samples_per_s=44.0, wait_fraction=0.01),))
    profile_line = line(Profiled(p, None, cpus=2, busy=0.5))
    assert "step 482.8 ms" in profile_line
    v = verdict(ev)
    assert v.kind == "compute", v.headline
    assert "(482.8 ms a batch as profiled, 726.7 ms as the bursts corrected it (x1.51))" in v.headline
    compute = next(f for f in v.findings if f.topic == "compute")
    assert "482.8 ms a batch of 32 as profiled, 726.7 ms as the bursts corrected it" in compute.text
    # Uncorrected, one figure: the profile's.
    plain = verdict(replace(ev, calibration=Calibration()))
    assert "(482.8 ms a batch)" in plain.headline and "corrected" not in plain.headline


def test_a_verdict_never_calls_its_own_pick_short_of_workers():
    from explain_cases import evidence, profile

    from autoloader.search.space import LoaderConfig

    # Workers that make slow batches on 8 CPUs, the pick one worker at a rate the run measured;
    # two workers measured slower (the quick start: w1 at 229/s, "too few for the cores").
    p = profile(sample_s=0.002, step_s=0.0001, cpus=8, device="cpu")
    pick, two = LoaderConfig.make(32, 1, False), LoaderConfig.make(32, 2, False)
    trials = (TrialResult(pick, OK, samples_per_s=229.0, wait_fraction=0.8),
              TrialResult(two, OK, samples_per_s=200.0, wait_fraction=0.8))
    v = verdict(evidence(p, "cpu", pick, samples_per_s=229.0, trials=trials))
    assert v.kind == "input/workers", v.headline
    assert "too few" not in v.paragraph
    assert "more workers measured no faster (bs32-w2-pin0-pf2-pw1 read 200/s)" in v.headline
    # The model's cap above the rate measured is said as the model's, beside the run's.
    assert "by the model (the run measured 229/s)" in v.headline


def test_a_run_whose_profile_was_cut_short_predicts_nothing():
    from autoloader.tuning.measured import fallback_profile

    data = _busy_one_burst()
    info = type("Info", (), {"sample_seconds": 0.002, "sample_bytes": 4096, "length": 1000})()
    data["profile"] = fallback_profile(info, 32, 16).to_dict()
    data["predicted"], data["knee"], data["reorder_gain"] = None, None, None
    result, text, md, page, out = _surfaces(data)
    assert result.profile.measured is False
    assert "predicted            not predicted" in text and "by the model" not in text
    assert "worker knee" not in text and not re.search(r"^\s+curve\s", text, re.M)
    assert "| samples/s (the model's) | not predicted" in md and "not predicted" in page
    assert out["predicted"] is None and out["knee"] is None and out["profile"]["measured"] is False
    assert out["explained"]["kind"] == "unprofiled" and out["explained"]["ceiling"]["ceiling"] is None
    assert "the profile was not measured" in out["explained"]["headline"]
    assert "worker knee" not in md and "No ceiling: the profile was not measured" in md
    assert explain(result).whatifs == ()
    # The trials' table has no model column figure either.
    header, _, *rows = [r for r in md.split("## Every trial")[1].splitlines() if r.startswith("| ")]
    at = [c.strip() for c in header.split("|")].index("predicted")
    assert rows and all(r.split("|")[at].strip() == "-" for r in rows)


def test_no_model_plot_without_a_profile():
    import pytest

    pytest.importorskip("matplotlib")
    from autoloader.explain.plots import draw
    from autoloader.tuning.measured import fallback_profile

    data = _busy_one_burst()
    info = type("Info", (), {"sample_seconds": 0.002, "sample_bytes": 4096, "length": 1000})()
    data["profile"], data["predicted"], data["knee"] = fallback_profile(info, 32, 16).to_dict(), None, None
    assert set(draw(explain(TuneResult.from_dict(data)))) == {"memory", "timeline"}


def test_the_rule_line_of_one_round_says_its_figure():
    from autoloader.search.choice import Finalist, rule_verdict

    # The quick start: the pick is the rule's config, w0 met it in one round at a third.
    rule, w0 = LoaderConfig.make(32, 1, False), LoaderConfig.make(32, 0, False)
    finals = [Finalist(rule, (229.0,), (0.5,), None, (0,)), Finalist(w0, (76.0,), (0.9,), None, (0,))]
    said = rule_verdict(rule, rule, finals)
    assert "met it in one round and read 0.33x of it: not judged" in said, said


def test_show_tells_the_same_caveats():
    from autoloader.fleet.show import result_text

    result, text, md, page, data = _surfaces(_busy_one_burst())
    shown = result_text(result)
    for label, said in data["explained"]["caveats"]:
        assert said in shown and said in text, said
    assert rate(result.samples_per_s, "") in shown


# -- a real run beside CPU spinners, its pick from one burst, no final ---------------------------

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results", "busy-one-burst-20261206.json")


def test_a_real_busy_one_burst_run_tells_one_story():
    """The README's worked example tuned on this repository's 2-core machine while other test runs
    took both CPUs: the pick from one burst, no final. Its step, ceiling, rule, load and basis
    are one value each across the table, the page and the JSON."""
    with open(FIXTURE) as f:
        result, text, md, page, data = _surfaces(json.load(f))
    assert result.busy and not result.finals
    profile_line = line(Profiled(result.profile, None, cpus=2, busy=0.5))
    step = re.search(r"step ([0-9.]+ ms)", profile_line).group(1)
    v = verdict(Evidence.from_result(result))
    assert f"{step} a batch of 64 as profiled" in " ".join(f.text for f in v.findings)
    c = data["explained"]["ceiling"]
    sentence = ceiling(Evidence.from_result(result)).sentence()
    assert rate(c["ceiling"]) in sentence and html_escape(sentence) in page and sentence in md
    if c["step_rate_corrected"] is not None and abs(c["step_rate_corrected"] / c["step_rate"] - 1) > 0.005:
        # The verdict's corrected step is the ceiling's too.
        assert rate(c["step_rate_corrected"]) in sentence and f"{rate(c['step_rate_corrected'])} at most" in v.paragraph
    assert c["ceiling"] >= max(t.samples_per_s for t in result.trials if t.samples_per_s and not t.pruned)
    for label, said in data["explained"]["caveats"]:
        assert said in text and said in md and html_escape(said) in page, said
    assert any(said.startswith("from one burst, no final") for _, said in data["explained"]["caveats"])
    assert data["explained"]["headline"] in text


def test_no_what_if_claims_without_a_profile():
    from autoloader.tuning.record import what_if_claims
    from autoloader.tuning.measured import fallback_profile

    data = _busy_one_burst()
    assert what_if_claims(TuneResult.from_dict(data))   # measured: the what-ifs are worked out
    info = type("Info", (), {"sample_seconds": 0.002, "sample_bytes": 4096, "length": 1000})()
    data["profile"], data["predicted"], data["knee"] = fallback_profile(info, 32, 16).to_dict(), None, None
    assert what_if_claims(TuneResult.from_dict(data)) == ()


def test_show_json_of_one_result_is_the_tunes(tmp_path):
    from click.testing import CliRunner

    from autoloader.cli import main as cli

    with open(FIXTURE) as f:
        data = json.load(f)
    folder = tmp_path / data["hardware"]["fingerprint"]
    folder.mkdir()
    path = folder / f"{data['dataset_key']}.json"
    path.write_text(json.dumps(data))
    done = CliRunner().invoke(cli, ["show", str(path), "--json"])
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    told = json.loads(as_json(TuneResult.from_dict(data)))
    assert shown["explained"] == told["explained"] and shown["samples_per_s"] == told["samples_per_s"]
