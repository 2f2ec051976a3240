"""The framework integrations against the real packages (CPU, tiny models built from configs,
nothing downloaded): Lightning's TunedDataModule in one process and under two DDP ranks, the
Hugging Face Trainer's tune_trainer, accelerate's tuned_loader through prepare(), the pure
formats, and ``--format`` on the command line. Each framework's tests skip when it is missing."""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import pickle
import subprocess
import sys

import pytest
from click.testing import CliRunner

from autoloader import LoaderConfig, TunedConfig, UsageError, stored_result
from autoloader.cli import main as cli
from autoloader.integrations import MissingFramework, formats
from autoloader.integrations import lightning as lightning_integration

from conftest import REPO_ROOT
from integration_workloads import Points, Tokens, linear_module, tiny_bert, tiny_tokenizer

SETTINGS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
TUNE = dict(budget=20, trial_timeout=20, tune="before")   # a tune apart (the in-run one: its own test)


def settings_of(loader) -> dict:
    return {name: getattr(loader, name) for name in SETTINGS}


def prepared_settings(prepared) -> dict:
    """A prepared loader's settings: accelerate's DataLoaderShard batches through a batch sampler
    (its own ``batch_size`` is None), whose batch size is the one each process loads."""
    return {**settings_of(prepared), "batch_size": prepared.batch_sampler.batch_size}


def full(config: LoaderConfig) -> dict:
    """A config as a built DataLoader's attributes read (the worker-only ones None/False)."""
    return {"batch_size": config.batch_size, "num_workers": config.num_workers, "pin_memory": config.pin_memory,
            "prefetch_factor": config.prefetch_factor, "persistent_workers": config.persistent_workers}


def only_result(out) -> dict:
    paths = glob.glob(os.path.join(str(out), "*", "*.json"))
    assert len(paths) == 1, paths
    with open(paths[0]) as f:
        return {**json.load(f), "file": paths[0]}


def recorder():
    events: list[str] = []
    return events, lambda event: events.append(event.kind)


# --- formats: pure -----------------------------------------------------------------------------

WORKERS = LoaderConfig.make(64, 3, False, 4, True)


def test_formats_read_every_form_of_a_result():
    import torch.utils.data

    tuned = TunedConfig(WORKERS, 100.0, None, None, None, {}, "key", "cpu")
    loader = torch.utils.data.DataLoader(Points(), **WORKERS.loader_kwargs())   # no worker starts until iter()
    for form in (WORKERS, tuned, tuned.to_dict(), WORKERS.loader_kwargs(), loader):
        assert formats.result_settings(form) == WORKERS, form
    assert formats.dataloader_kwargs(tuned) == WORKERS.loader_kwargs()
    assert formats.training_arguments(tuned) == {
        "dataloader_num_workers": 3, "dataloader_pin_memory": False, "dataloader_persistent_workers": True,
        "dataloader_prefetch_factor": 4}
    assert formats.render(tuned, "kwargs") == ("batch_size=64, num_workers=3, pin_memory=False, prefetch_factor=4, "
                                               "persistent_workers=True\n")
    assert formats.render(tuned, "hf") == ("dataloader_num_workers=3, dataloader_pin_memory=False, "
                                           "dataloader_persistent_workers=True, dataloader_prefetch_factor=4\n")


def test_training_arguments_of_a_reordering_pick_and_of_a_searched_batch_size():
    reorders = LoaderConfig.make(32, 2, True, 2, True, in_order=False)
    fields = formats.training_arguments(reorders, batch_size=True)
    assert fields["dataloader_in_order"] is False and fields["per_device_train_batch_size"] == 32
    no_workers = formats.training_arguments(LoaderConfig.make(8, 0, False))
    assert no_workers == {"dataloader_num_workers": 0, "dataloader_pin_memory": False,
                          "dataloader_persistent_workers": False, "dataloader_prefetch_factor": None}


def test_the_lightning_source_builds_the_tuned_loader():
    import types

    namespace: dict = {}
    exec(formats.render(WORKERS, "lightning"), namespace)
    loader = namespace["train_dataloader"](types.SimpleNamespace(train_dataset=Points()))
    assert settings_of(loader) == full(WORKERS)
    assert type(loader.sampler).__name__ == "RandomSampler"
    assert loader.worker_init_fn.__name__ == "seed_worker"


def test_formats_refuse_what_is_no_result():
    with pytest.raises(UsageError, match="must be a TuneResult.*got 'int'.*Fix"):
        formats.result_settings(3)
    with pytest.raises(UsageError, match="format must be one of kwargs, hf, lightning"):
        formats.render(WORKERS, "yaml")


def test_a_trainer_over_several_nodes_is_refused_before_any_tune():
    import types

    trainer = types.SimpleNamespace(num_nodes=2, strategy=None)
    with pytest.raises(UsageError, match="several nodes.*num_nodes=2.*Fix: tune once with Trainer.num_nodes=1"):
        lightning_integration.tuned_dataloader(Points(), trainer=trainer, batch_size=8)


def test_a_missing_framework_names_its_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)   # import then raises ImportError
    with pytest.raises(MissingFramework, match="needs lightning.*Fix: pip install lightning"):
        lightning_integration.__getattr__("TunedDataModule")
    monkeypatch.setitem(sys.modules, "transformers", None)
    from autoloader.integrations.huggingface import tune_trainer

    with pytest.raises(MissingFramework, match="needs transformers.*Fix: pip install transformers"):
        tune_trainer(object())


@pytest.mark.parametrize("given", [5, "a string", None])
def test_each_framework_helper_refuses_what_it_cannot_take_with_the_rule_the_value_and_the_fix(given):
    pytest.importorskip("transformers")
    from autoloader.integrations.accelerate import tuned_loader
    from autoloader.integrations.huggingface import tune_trainer

    with pytest.raises(UsageError, match=r"tune_trainer takes a transformers.Trainer .*\(got .*(int 5|str 'a string'|"
                                         r"NoneType None).*\)\. Fix: pass the Trainer you call .train\(\) on"):
        tune_trainer(given)
    if given is None:
        with pytest.raises(UsageError, match=r"tuned_loader\(dataset\) is a Dataset.*got 'NoneType None'.*Fix"):
            tuned_loader(given)
    else:
        with pytest.raises(UsageError, match=r"tuned_dataloader\(trainer=\) takes a Lightning Trainer .*without "
                                             r"strategy, num_nodes.*Fix: pass trainer=self.trainer"):
            lightning_integration.tuned_dataloader(Points(), trainer=given, batch_size=8)
    if not isinstance(given, str) and given is not None:
        with pytest.raises(UsageError, match=r"tuned_loader\(dataset\) is a Dataset.*got 'int 5'.*Fix: pass the "
                                             r"training set itself"):
            tuned_loader(given, batch_size=8)


def test_the_datamodule_is_a_module_level_class_that_pickles_and_checks_its_dataset():
    pytest.importorskip("lightning")
    from autoloader.integrations.lightning import TunedDataModule

    assert "<locals>" not in TunedDataModule.__qualname__
    copy = pickle.loads(pickle.dumps(TunedDataModule(Points(), batch_size=8, budget=10)))
    assert type(copy) is TunedDataModule and copy.batch_size == 8 and copy.options == {"budget": 10}
    with pytest.raises(UsageError, match=r"TunedDataModule\(train_dataset\) is a Dataset.*got 'int 5'.*Fix"):
        TunedDataModule(5)


# --- Lightning ----------------------------------------------------------------------------------

def lightning_trainer(**overrides):
    lightning = pytest.importorskip("lightning")
    options = dict(accelerator="cpu", devices=1, max_epochs=2, limit_train_batches=3, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    return lightning.Trainer(**{**options, **overrides})


@pytest.mark.slow
def test_lightning_tunes_on_the_first_fit_and_reuses_the_stored_result_after(tmp_path):
    pytest.importorskip("lightning")
    from autoloader.integrations.lightning import TunedDataModule

    runs = []
    for _ in range(2):
        events, progress = recorder()
        data = TunedDataModule(Points(), batch_size=32, out=str(tmp_path), progress=progress, **TUNE)
        trainer = lightning_trainer()
        trainer.fit(linear_module(), datamodule=data)
        stored = only_result(tmp_path)
        runs.append((events, stored, os.stat(stored["file"]).st_mtime_ns))
        used = trainer.train_dataloader
        assert type(used.sampler).__name__ == "RandomSampler", "one process: Lightning replaced no sampler"
        tuned = stored_result(Points(), batch_size=32, device="cpu", out=str(tmp_path))
        assert tuned is not None and settings_of(used) == full(tuned.config)
        assert data.settings == tuned.config.loader_kwargs()
    (first, result, written), (second, again, rewritten) = runs
    assert "trial" in first and "done" in first, first
    assert second == ["reused", "applied"], "the second fit finds the stored result and tunes nothing"
    assert again["run_id"] == result["run_id"] and rewritten == written


@pytest.mark.slow
@pytest.mark.heavy
def test_lightning_ddp_ranks_tune_together_and_keep_their_sampler_and_accelerate_shards_once(tmp_path):
    """Two DDP ranks (Lightning's own launcher) run tests/integration_ranks.py: see its docstring."""
    pytest.importorskip("lightning")
    pytest.importorskip("accelerate")
    report = str(tmp_path / "report")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, os.path.join("tests", "integration_ranks.py"), str(tmp_path / "out"),
                           report], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = []
    for rank in (0, 1):
        with open(f"{report}.{rank}.json") as f:
            ranks.append(json.load(f))
    stored = only_result(tmp_path / "out")
    assert stored["hardware"]["fingerprint"].endswith("-2rank"), "a node's tune of 2 ranks"
    pick = LoaderConfig.from_dict(stored["config"])
    assert "trial" in ranks[0]["first"]["events"], "rank 0 searched"
    assert ranks[1]["first"]["events"] == [], "rank 1 served rank 0's trials and reported nothing"
    for rank, seen in enumerate(ranks):
        assert seen["world"] == 2
        for fit in (seen["first"], seen["second"]):
            assert fit["same_loader"], "Lightning kept the loader it was given"
            assert fit["sampler"] == "DistributedSampler" and fit["num_replicas"] == 2 and fit["sampler_rank"] == rank
            assert fit["sampler_epoch"] == 1, "Lightning called set_epoch on it for the second epoch"
            assert fit["used"] == full(pick), "every rank trains with the node's pick"
        # Reused, nothing tuned: rank 0 says only the closing line (NOTE [ The closing line ] in
        # api.py), the other ranks nothing.
        said = ["applied"] if rank == 0 else []
        assert seen["second"]["events"] == said, "the second fit reused the stored result"
        shards = seen["accelerate"]
        assert shards["events"] == said * 2, "best_loader and tuned_loader found the same stored result"
        assert shards["rank_loader_sampler"] == "DistributedSampler" and shards["tuned_loader_sampler"] == "RandomSampler"
        assert shards["tuned_settings"] == shards["rank_settings"] == full(pick)
    twice = [set(seen["accelerate"]["best_loader"]) for seen in ranks]
    once = [set(seen["accelerate"]["tuned_loader"]) for seen in ranks]
    assert [len(s) for s in twice] == [128, 128] and len(twice[0] | twice[1]) == 256, \
        "prepare() shards a DistributedSampler's loader again: half the data unread"
    assert [len(s) for s in once] == [256, 256] and once[0] | once[1] == set(range(512)) and not once[0] & once[1]


@pytest.mark.slow
@pytest.mark.heavy
def test_lightning_ddp_spawn_ranks_tune_in_the_run_together(tmp_path):
    """Two ``ddp_spawn`` ranks on the CPU (gloo) run tests/integration_spawn.py: see its docstring."""
    pytest.importorskip("lightning")
    report = str(tmp_path / "report")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.path.join(REPO_ROOT, "tests"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, os.path.join("tests", "integration_spawn.py"), str(tmp_path / "out"),
                           report], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Can't pickle" not in done.stderr
    stored = only_result(tmp_path / "out")
    assert stored["hardware"]["fingerprint"].endswith("-2rank"), "the spawned ranks tuned together"
    assert stored["node"]["ranks"] == 2 and "in_run" in stored
    seen = []
    for rank in (0, 1):
        with open(f"{report}.{rank}.json") as f:
            seen.append(json.load(f))
    for rank, s in enumerate(seen):
        assert s["world"] == 2 and s["loader"] == "InRunLoader" and s["state"] == "settled", s["state"]
        assert s["sampler"] == "DistributedSampler" and s["num_replicas"] == 2 and s["sampler_rank"] == rank
        assert s["pick"] == LoaderConfig.from_dict(stored["config"]).key
        assert len(s["seen"]) == 3 and all(len(e) == 2048 for e in s["seen"]), [len(e) for e in s["seen"]]
    for epoch in range(3):
        assert sorted(seen[0]["seen"][epoch] + seen[1]["seen"][epoch]) == list(range(4096)), "each sample once"
    assert seen[0]["readings"] == seen[1]["readings"], "one schedule: the same readings on both ranks"
    assert len({key for key, _, _ in seen[0]["readings"]}) >= 2


# --- Hugging Face Trainer -----------------------------------------------------------------------

def hf_trainer(tmp_path, collator=None, dataset=None):
    transformers = pytest.importorskip("transformers")
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=16,
                                          max_steps=2, use_cpu=True, report_to=[], save_strategy="no")
    if collator is None:
        collator = transformers.DataCollatorWithPadding(tiny_tokenizer())
    return transformers.Trainer(model=tiny_bert(), args=args, train_dataset=dataset or Tokens(),
                                data_collator=collator)


@pytest.mark.slow
def test_trainer_inputs_collate_as_the_trainers_own_loader_and_travel_pickled(tmp_path):
    transformers = pytest.importorskip("transformers")
    from autoloader.integrations.huggingface import trainer_inputs

    for collator, dataset in ((None, Tokens()), (transformers.default_data_collator, Tokens(fixed=True))):
        trainer = hf_trainer(tmp_path, collator, dataset)
        data, fixed = trainer_inputs(trainer)
        assert data is dataset
        collate = pickle.loads(pickle.dumps(fixed["collate_fn"]))   # as the spawned trial process gets it
        ours = collate([dataset[i] for i in range(16)])
        theirs = next(iter(trainer.get_train_dataloader()))
        assert type(ours) is dict and sorted(ours) == sorted(theirs) == ["attention_mask", "input_ids", "labels"], \
            "the column model.forward does not take (length) is dropped, as the Trainer drops it"
        assert repr(collate) == repr(fixed["collate_fn"]) and " at 0x" not in repr(collate), "a key that holds"


@pytest.mark.slow
def test_tune_trainer_refuses_a_collator_that_cannot_travel_and_a_batch_size(tmp_path):
    pytest.importorskip("transformers")
    from autoloader.integrations.huggingface import tune_trainer

    trainer = hf_trainer(tmp_path, collator=lambda features: features)
    with pytest.raises(UsageError, match="data_collator must be picklable.*lambda.*Fix: define the collator at"):
        tune_trainer(trainer, out=str(tmp_path), **TUNE)
    with pytest.raises(UsageError, match="honours the trainer's batch size.*batch_sizes=.*Fix"):
        tune_trainer(hf_trainer(tmp_path), batch_sizes=[8, 16])
    assert not glob.glob(os.path.join(str(tmp_path), "*", "*.json")), "refused before any tune"


@pytest.mark.slow
def test_tune_trainer_sets_the_four_dataloader_arguments_and_the_trainer_trains(tmp_path):
    pytest.importorskip("transformers")
    from autoloader.integrations.huggingface import trainer_inputs, training_arguments, tune_trainer

    events, progress = recorder()
    trainer = hf_trainer(tmp_path)
    fields = tune_trainer(trainer, out=str(tmp_path), progress=progress, **TUNE)
    assert "trial" in events
    dataset, fixed = trainer_inputs(trainer)
    tuned = stored_result(dataset, batch_size=16, device="cpu", out=str(tmp_path), **fixed)
    assert tuned is not None, "tuned with the trainer's dataset, collator and batch size"
    assert fields == {**training_arguments(tuned), "dataloader_in_order": True}
    for name, value in fields.items():
        assert getattr(trainer.args, name) == value
    loader = trainer.get_train_dataloader()
    assert (loader.num_workers, loader.pin_memory, loader.prefetch_factor, loader.persistent_workers) == \
        (tuned.config.num_workers, tuned.config.pin_memory, tuned.config.prefetch_factor,
         tuned.config.persistent_workers)
    assert math.isfinite(trainer.train().training_loss)
    transformers = pytest.importorskip("transformers")
    built = transformers.TrainingArguments(output_dir=str(tmp_path / "again"), use_cpu=True, report_to=[],
                                           **training_arguments(tuned))
    assert all(getattr(built, name) == value for name, value in training_arguments(tuned).items())

    events, progress = recorder()
    assert tune_trainer(hf_trainer(tmp_path), out=str(tmp_path), progress=progress, **TUNE) == fields
    assert events == ["reused", "applied"], "a new Trainer over the same data finds the stored result"


# --- the closing line ---------------------------------------------------------------------------

STORED = TunedConfig(WORKERS, 1234.0, 0.02, 400.0, None, {"fingerprint": "box", "cpus": 2}, "ds-key", "cpu")


@dataclasses.dataclass
class Stored:
    """A stored result as the lookup reads it: its pick is all a reuse hands out."""
    tuned: TunedConfig


def reused_everywhere(monkeypatch):
    """Every lookup finds STORED (no tune, no trial process), and the events each call reports."""
    import autoloader.api as api

    monkeypatch.setattr(api, "_stored_result", lambda problem, out, set_aside=False: (Stored(STORED), None))
    seen: list = []
    return seen


def closing(seen) -> list:
    return [e for e in seen if e.kind == "applied"]


def test_best_loader_closes_with_the_settings_it_applied_reused_and_where(monkeypatch, tmp_path):
    from autoloader import best_loader

    seen = reused_everywhere(monkeypatch)
    loader = best_loader(Points(), batch_size=64, device="cpu", out=str(tmp_path), progress=seen.append)
    assert settings_of(loader) == full(WORKERS)
    [line] = closing(seen)
    assert line.reused and line.to == "the DataLoader returned" and line.path.startswith(str(tmp_path))
    assert line.line == ("autoloader: applied batch_size=64, num_workers=3, pin_memory=False, prefetch_factor=4, "
                         f"persistent_workers=True to the DataLoader returned (reused, 1,234/s; result {line.path})")
    seen.clear()
    best_loader(Points(), batch_size=64, device="cpu", out=str(tmp_path), progress=False)
    assert seen == [], "progress=False says nothing"


@pytest.mark.slow   # imports Lightning, transformers and accelerate, and builds a tiny Trainer
def test_each_framework_helper_closes_with_one_line_naming_what_it_set(monkeypatch, tmp_path):
    """One closing line a call, the outermost helper's words in it (NOTE [ The closing line ])."""
    seen = reused_everywhere(monkeypatch)
    out = dict(out=str(tmp_path), progress=seen.append)
    said = {}
    if _has("lightning"):
        from autoloader.integrations.lightning import TunedDataModule, tuned_dataloader

        tuned_dataloader(Points(), batch_size=64, device="cpu", **out)
        said["the Lightning train loader returned"] = closing(seen)
        seen.clear()
        TunedDataModule(Points(), batch_size=64, device="cpu", **out).train_dataloader()
        said["TunedDataModule's train loader"] = closing(seen)
        seen.clear()
    if _has("accelerate"):
        from autoloader.integrations.accelerate import tuned_loader

        tuned_loader(Points(), batch_size=64, device="cpu", **out)
        said["the loader for accelerator.prepare()"] = closing(seen)
        seen.clear()
    if _has("transformers"):
        from autoloader.integrations.huggingface import tune_trainer

        tune_trainer(hf_trainer(tmp_path), **out)
        said["the Trainer's TrainingArguments (dataloader_*)"] = closing(seen)
    assert said, "no framework installed"
    for to, lines in said.items():
        assert len(lines) == 1 and lines[0].to == to and lines[0].reused, (to, lines)
        assert f" to {to} (reused, 1,234/s; result " in lines[0].line


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# --- accelerate ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_prepare_keeps_the_worker_settings_of_the_loader_it_is_given():
    accelerate = pytest.importorskip("accelerate")
    import torch.utils.data

    loader = torch.utils.data.DataLoader(Points(), shuffle=True, **WORKERS.loader_kwargs())
    prepared = accelerate.Accelerator(cpu=True).prepare(loader)
    assert type(prepared).__name__ == "DataLoaderShard"
    assert prepared_settings(prepared) == settings_of(loader) == full(WORKERS)


@pytest.mark.slow
def test_the_tuned_loader_through_prepare_keeps_its_settings_and_trains_a_step(tmp_path):
    accelerate = pytest.importorskip("accelerate")
    import torch

    from autoloader.integrations.accelerate import tuned_loader

    dataset = Points(cost_s=0.002)
    loader = tuned_loader(dataset, batch_size=32, out=str(tmp_path), **TUNE)
    tuned = stored_result(dataset, batch_size=32, out=str(tmp_path))
    assert tuned is not None and settings_of(loader) == full(tuned.config)
    accelerator = accelerate.Accelerator(cpu=True)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer, prepared = accelerator.prepare(model, optimizer, loader)
    assert prepared_settings(prepared) == full(tuned.config)
    x, y, _ = next(iter(prepared))
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    assert math.isfinite(loss.item())


# --- the command line ---------------------------------------------------------------------------

def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.slow
def test_cli_prints_a_result_in_each_framework_form(tmp_path, repo_cwd):
    import types

    out = str(tmp_path)
    tuned = invoke("tune", "--dataset", "tests/integration_workloads.py:Points", "--batch-size", "32",
                   "--budget", "10", "--quiet", "--out", out, "--format", "hf")
    assert tuned.exit_code == 0, (tuned.output, tuned.exception)
    stored = only_result(out)
    assert eval(f"dict({tuned.stdout.strip()})") == formats.training_arguments(stored)

    shown = {form: invoke("show", stored["file"], "--out", out, "--format", form) for form in formats.FORMATS}
    assert all(r.exit_code == 0 for r in shown.values()), {f: r.output for f, r in shown.items()}
    assert shown["hf"].stdout == tuned.stdout
    assert eval(f"dict({shown['kwargs'].stdout.strip()})") == formats.dataloader_kwargs(stored)
    namespace: dict = {}
    exec(shown["lightning"].stdout, namespace)
    loader = namespace["train_dataloader"](types.SimpleNamespace(train_dataset=Points()))
    assert settings_of(loader) == full(LoaderConfig.from_dict(stored["config"]))


def test_cli_format_needs_one_result_and_no_json(tmp_path):
    for args, needle in ((("show", "--format", "hf", "--out", str(tmp_path)), "--format prints one result"),
                         (("show", "key", "--format", "hf", "--json"), "--format and --json"),
                         (("tune", "--dataset", "x:y", "--format", "kwargs", "--json"), "--format and --json")):
        result = invoke(*args)
        assert result.exit_code == 2 and needle in result.stderr and "Fix:" in result.stderr, result.output
