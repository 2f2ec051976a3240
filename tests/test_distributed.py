"""A node's ranks tuned together (NOTE [ Tuning a node's ranks ] in node/__init__.py), with two CPU ranks
on gloo: what CI can run. Each multi-rank test starts real ranks (``autoloader tune
--nproc-per-node 2`` in a subprocess, or two spawned processes calling the API as torchrun's
ranks would) with a 10 s budget on tests/workloads.py's tiny datasets.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT, WORKLOADS

from autoloader.cli import main
from autoloader.inputs.hardware import Hardware, usable_cpus
from autoloader.node.group import check_nproc, node_share
from autoloader.node.launch import _free_port
from autoloader.node.runner import node_result
from autoloader.search.policy import MAX_WORKERS_PER_CPU
from autoloader.search.results import FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig

two_cpus = pytest.mark.skipif(usable_cpus() < 2, reason="two ranks need two CPUs")


def _ranks_env(port: int, rank: int, world: int) -> dict:
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)}


def _spawned(target, world: int, *args, timeout: float = 120.0) -> None:
    """``target(rank, port, *args)`` in ``world`` spawned processes, each a rank; all must exit 0."""
    context = mp.get_context("spawn")
    port = _free_port()
    procs = [context.Process(target=target, args=(rank, port, *args)) for rank in range(world)]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout)
        assert [p.exitcode for p in procs] == [0] * world, [p.exitcode for p in procs]
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()


# --- seed_worker across ranks -------------------------------------------------------------------

def _draws_as_rank(rank: int, port: int, path: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from workloads import RandomDraws

    from autoloader import seed_worker

    os.environ.update(_ranks_env(port, rank, 2))
    os.environ["RANK"] = "0"   # the rank must come from torch.distributed, not from the environment
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        epochs = []
        for persistent in (False, True):
            loader = DataLoader(RandomDraws(16), batch_size=None, num_workers=2, worker_init_fn=seed_worker,
                                persistent_workers=persistent, generator=torch.Generator().manual_seed(7),
                                multiprocessing_context="fork")
            epochs.append([[[float(v) for v in sample] for sample in loader] for _ in range(2)])
        with open(f"{path}.{rank}", "w") as fh:
            json.dump(epochs, fh)
    finally:
        dist.destroy_process_group()


@two_cpus
@pytest.mark.slow
def test_two_gloo_ranks_draw_distinct_streams(tmp_path):
    # The same generator seed and the same RANK in both: only torch.distributed's rank tells them apart.
    path = str(tmp_path / "draws")
    _spawned(_draws_as_rank, 2, path)
    runs = [json.load(open(f"{path}.{rank}")) for rank in (0, 1)]
    for mode in (0, 1):
        for epoch in range(2):
            a, b = runs[0][mode][epoch], runs[1][mode][epoch]
            for source, name in enumerate(("np.random", "random", "torch", "worker_generator")):
                shared = {s[source] for s in a} & {s[source] for s in b}
                assert not shared, f"{name}: ranks 0 and 1 share draws (persistent={bool(mode)}, epoch {epoch})"


# --- the node's figures ----------------------------------------------------------------------------

CONFIG = LoaderConfig.make(16, 1, False)


def test_a_node_trial_is_its_slowest_rank_and_lists_every_rank():
    ranks = [TrialResult(CONFIG, OK, samples_per_s=900.0, wait_fraction=0.1, peak_pss_bytes=5, seconds=2.0),
             TrialResult(CONFIG, OK, samples_per_s=600.0, wait_fraction=0.4, peak_pss_bytes=9, seconds=3.0)]
    node = node_result(CONFIG, ranks)
    assert node.status == OK and node.samples_per_s == 600.0 and node.rank_samples_per_s == (900.0, 600.0)
    assert (node.wait_fraction, node.peak_pss_bytes, node.seconds) == (0.4, 9, 3.0)


def test_a_failure_on_one_rank_is_the_node_trials_naming_the_rank():
    ranks = [TrialResult(CONFIG, OK, samples_per_s=900.0),
             TrialResult(CONFIG, FAILED, cause="dataset_error", error="RuntimeError: bad sample")]
    node = node_result(CONFIG, ranks)
    assert node.status == FAILED and node.cause == "dataset_error"
    assert node.error.startswith("rank 1 of 2: ") and "bad sample" in node.error


def test_the_rank_count_enters_the_fingerprint_and_the_cpus_are_split():
    one = Hardware(16, "cpu", 64, ())
    assert one.fingerprint == Hardware(16, "cpu", 64, (), ranks=1).fingerprint
    assert Hardware(8, "cpu", 64, (), ranks=2).fingerprint.endswith("-2rank")
    assert Hardware(8, "cpu", 64, (), ranks=2).to_dict()["ranks"] == 2
    everything = frozenset(range(16))
    assert node_share([everything, everything], [16, 16], None) == (16, 8)
    assert node_share([frozenset(range(8)), frozenset(range(8, 16))], [8, 8], None) == (16, 8)
    assert node_share([everything] * 4, [16, 2, 16, 16], None) == (16, 2), "a narrower rank's own affinity"
    assert node_share([everything] * 2, [16, 16], 6.0) == (6, 3), "the cgroup quota caps the node"
    assert node_share([frozenset({0})] * 4, [1] * 4, None) == (1, 1), "at least one CPU a rank"


# --- the command ------------------------------------------------------------------------------------

def _usage(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Error:" in result.stderr and "Fix:" in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


@pytest.mark.parametrize("value, needles", [
    ("0", ["1 or more", "--nproc-per-node 8"]),
    ("-2", ["-2", "1 or more"]),
    ("100000", ["100000", f"--nproc-per-node {usable_cpus()} or fewer"]),
], ids=["zero", "negative", "past-the-cpus"])
def test_bad_nproc_per_node_exits_2_with_the_fix(value, needles, out_dir):
    result = CliRunner().invoke(main, ["tune", "--dataset", f"{WORKLOADS}:tiny", "--device", "cpu", "--out", out_dir,
                                       "--quiet", "--nproc-per-node", value])
    _usage(result, *needles)
    assert os.listdir(out_dir) == []


def test_nproc_per_node_past_the_gpus_or_inside_torchrun_is_a_usage_error(monkeypatch):
    from autoloader.errors import UsageError

    with pytest.raises(UsageError, match=r"2 GPU\(s\).*--nproc-per-node 2 or fewer"):
        check_nproc(3, "cuda", 2, 64)
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(UsageError, match="already one rank of 4.*call tune\\(\\) in every rank"):
        check_nproc(2, "cpu", 0, 64)


def _cli(*args: str, timeout: float = 150.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "autoloader.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO_ROOT)


@two_cpus
@pytest.mark.slow
@pytest.mark.heavy
def test_a_two_rank_tune_writes_one_node_result(out_dir):
    done = _cli("tune", "--dataset", f"{WORKLOADS}:tiny", "--nproc-per-node", "2", "--device", "cpu",
                "--budget", "10", "--batch-size", "16", "--out", out_dir, "--json", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = os.listdir(out_dir)
    assert folder.endswith("-2rank"), "single-rank and 2-rank results never share a folder or a study"
    files = sorted(os.listdir(os.path.join(out_dir, folder)))
    # The lock file stays (filelock leaves it on POSIX: removing it would race a waiter).
    assert [f.rsplit(".", 1)[1] for f in files] == ["db", "json", "lock", "py"], files
    data = json.load(open(os.path.join(out_dir, folder, files[1])))
    per_rank = max(1, usable_cpus() // 2)
    assert data["hardware"]["ranks"] == 2 and data["hardware"]["cpus"] == per_rank
    assert data["node"]["ranks"] == 2 and data["node"]["cpus_per_rank"] == per_rank
    assert data["config"]["num_workers"] <= MAX_WORKERS_PER_CPU * per_rank
    assert data["rule"]["num_workers"] == data["node"]["node_cpus"] - 1, "the rule: node CPUs - 1 per rank"
    measured = [t for t in data["trials"] if t["status"] == OK]
    assert measured
    for trial in measured:
        assert len(trial["rank_samples_per_s"]) == 2
        assert trial["samples_per_s"] == min(trial["rank_samples_per_s"]), "a node trial is its slowest rank"
    is_pick = lambda config: all(config.get(k) == v for k, v in data["config"].items())  # noqa: E731
    rates = [f["median"] for f in data["finals"] if is_pick(f["config"])] or \
            [t["samples_per_s"] for t in measured if is_pick(t["config"])]
    assert rates, "the pick was measured"
    assert any(data["samples_per_s"] == pytest.approx(2 * rate) for rate in rates), \
        "the node's rate is 2 x the slower rank's"
    assert data["orphans"] == 0


@two_cpus
@pytest.mark.slow
@pytest.mark.heavy
def test_a_failure_on_rank_one_only_is_reported_naming_rank_one(out_dir):
    done = _cli("tune", "--dataset", f"{WORKLOADS}:breaks_on_rank_one", "--nproc-per-node", "2", "--device", "cpu",
                "--budget", "20", "--batch-size", "16", "--out", out_dir, "--quiet")   # 10 can end before a trial on a busy machine
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "no config ran" in done.stderr and "rank 1 of 2" in done.stderr, done.stderr[-3000:]
    assert "unreadable on rank 1" in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


# --- the API inside a torchrun-style launch -------------------------------------------------------------

def _best_loader_as_rank(rank: int, port: int, out: str) -> None:
    from workloads import Tiny

    from autoloader import best_loader

    os.environ.update(_ranks_env(port, rank, 2))
    loader = best_loader(Tiny(256), batch_size=16, budget=10, device="cpu", out=out, tune="before")
    sampler = loader.sampler
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump({"kwargs": {"num_workers": loader.num_workers, "batch_size": loader.batch_size},
                   "sampler": type(sampler).__name__, "rank": getattr(sampler, "rank", None),
                   "replicas": getattr(sampler, "num_replicas", None), "samples": len(sampler)}, fh)


@two_cpus
@pytest.mark.slow
@pytest.mark.heavy
def test_best_loader_on_two_ranks_tunes_once_and_shards(out_dir):
    _spawned(_best_loader_as_rank, 2, out_dir, timeout=150.0)
    seen = [json.load(open(os.path.join(out_dir, f"rank{rank}.json"))) for rank in (0, 1)]
    assert seen[0]["kwargs"] == seen[1]["kwargs"], "every rank gets rank 0's pick"
    assert [s["sampler"] for s in seen] == ["DistributedSampler"] * 2
    assert [(s["rank"], s["replicas"], s["samples"]) for s in seen] == [(0, 2, 128), (1, 2, 128)]
    folders = [f for f in os.listdir(out_dir) if os.path.isdir(os.path.join(out_dir, f))]
    assert len(folders) == 1 and folders[0].endswith("-2rank")


# --- tuning in the run under torchrun: NOTE [ Ranks in the run ] in inrun/ranks.py ---------------------------

def _in_run_as_rank(rank: int, port: int, out: str) -> None:
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from headroom_workloads import OneMs
    from short_readings import short_readings

    from autoloader import best_loader, tuned

    os.environ.update(_ranks_env(port, rank, 2))
    short_readings()
    data = OneMs(480, 0.0005 * (1 + 2 * rank))   # rank 1 is the slower: the node's pace
    sampler = DistributedSampler(data, num_replicas=2, rank=rank, shuffle=True, seed=3)
    loader = tuned(DataLoader(data, batch_size=8, sampler=sampler), device="cpu", out=os.path.join(out, "tuned"),
                   progress=False, epochs=3)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        read = [int(i) for batch in loader for i in batch[:, 0].tolist()]
        epochs.append({"read": read, "shard": list(iter(sampler))})
    plan = loader.plan
    other = best_loader(OneMs(64, 0.0), batch_size=8, device="cpu", out=os.path.join(out, "best"), progress=False)
    first = [int(i) for batch in other for i in batch[:, 0].tolist()]
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump({"epochs": epochs, "state": plan.state, "pick": plan.pick.key,
                   "readings": [(r.config.key, r.batches, r.rate) for r in plan.readings],
                   "best_loader": type(other).__name__, "best_sampler": type(other.sampler).__name__,
                   "best_first_epoch": first, "best_shard": list(iter(other.sampler))}, fh)


@two_cpus
@pytest.mark.slow
def test_ranks_tuning_in_the_run_read_one_schedule_and_pick_one_config(out_dir):
    _spawned(_in_run_as_rank, 2, out_dir, timeout=150.0)
    seen = [json.load(open(os.path.join(out_dir, f"rank{rank}.json"))) for rank in (0, 1)]
    for s in seen:
        assert s["state"] == "settled"
        assert all(e["read"] == e["shard"] for e in s["epochs"]), "each rank reads its shard, in order, each epoch"
        assert s["best_loader"] == "InRunLoader" and s["best_sampler"] == "DistributedSampler"
        assert s["best_first_epoch"] == s["best_shard"]
    assert sorted(seen[0]["epochs"][0]["read"] + seen[1]["epochs"][0]["read"]) == list(range(480))
    # One schedule: the same configs for as many batches, and the same reading of each (the
    # slower rank's, handed to both plans); one pick.
    assert seen[0]["readings"] == seen[1]["readings"] and len({k for k, _, _ in seen[0]["readings"]}) >= 2
    assert seen[0]["pick"] == seen[1]["pick"]
    stored = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(out_dir, "tuned")) for f in fs
              if f.endswith(".json")]
    assert len(stored) == 1 and os.path.basename(os.path.dirname(stored[0])).endswith("-2rank"), stored
    record = json.load(open(stored[0]))
    assert record["node"]["ranks"] == 2
    assert record["samples_per_s"] == pytest.approx(2 * record["in_run"]["pick_samples_per_s"])


def _uneven_as_rank(rank: int, port: int, out: str) -> None:
    from torch.utils.data import DataLoader

    from headroom_workloads import OneMs

    from autoloader import tuned
    from autoloader.errors import UsageError

    os.environ.update(_ranks_env(port, rank, 2))
    try:
        tuned(DataLoader(OneMs(64 + 16 * rank, 0.0), batch_size=8), device="cpu", out=out, progress=False)
        said = "no error"
    except UsageError as exc:
        said = str(exc)
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as fh:
        fh.write(said)


@two_cpus
@pytest.mark.slow
def test_ranks_whose_epochs_differ_are_told_to_shard(out_dir):
    _spawned(_uneven_as_rank, 2, out_dir, timeout=120.0)
    for rank in (0, 1):
        said = open(os.path.join(out_dir, f"rank{rank}.txt")).read()
        assert "epochs of 8, 10 batches" in said and "DistributedSampler" in said, said
