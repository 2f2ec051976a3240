"""Reading the cgroup's limits (inputs/cgroup.py) from fake trees: v1 and v2, a nested path, every
level up to the root, the tightest of each; and the memory ceiling they set."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT, WORKLOADS

from autoloader.errors import UsageError
from autoloader.inputs import cgroup, hardware
from autoloader.inputs.options import CGROUP_SHARE, Options

GIB = 2**30
UNLIMITED_V1 = "9223372036854771712"


def write(folder, **files):
    os.makedirs(folder, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(folder, name.replace("__", ".")), "w") as fh:
            fh.write(text + "\n")


def v1_tree(tmp_path, memory_path="/", cpu_path="/", cpuset_path="/", mount_root="/"):
    """A fake v1 machine: memory, cpu and cpuset mounted under tmp_path/fs, the process's cgroup paths."""
    fs = tmp_path / "fs"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        f"32 31 0:29 {mount_root} {fs}/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        f"34 31 0:31 {mount_root} {fs}/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        f"35 31 0:32 {mount_root} {fs}/memory rw,relatime - cgroup cgroup rw,memory\n"
        f"41 31 0:38 / {fs}/unified rw,relatime - cgroup2 cgroup2 rw\n")
    proc = tmp_path / "cgroup"
    proc.write_text(f"4:memory:{memory_path}\n3:cpuset:{cpuset_path}\n2:cpu,cpuacct:{cpu_path}\n0::/\n")
    return fs, str(proc), str(mountinfo)


def v2_tree(tmp_path, path="/"):
    fs = tmp_path / "fs"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 23 0:26 / {fs} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n")
    proc = tmp_path / "cgroup"
    proc.write_text(f"0::{path}\n")
    return fs, str(proc), str(mountinfo)


def test_no_cgroup_files_is_no_limit(tmp_path):
    assert cgroup.read(str(tmp_path / "none"), str(tmp_path / "none")) == cgroup.CgroupLimits()


def test_v1_nested_memory_every_level_and_the_least_room_wins(tmp_path):
    """A job step inside a job: the step sets no limit, the job 3 GiB with 2.5 GiB used (less its
    reclaimable cache), the slice 8 GiB nearly empty. The job's room is the tightest."""
    fs, proc, info = v1_tree(tmp_path, memory_path="/slurm/job_1/step_0")
    write(fs / "memory", memory__limit_in_bytes=UNLIMITED_V1, memory__usage_in_bytes=str(5 * GIB),
          memory__stat="total_inactive_file 0")
    write(fs / "memory/slurm", memory__limit_in_bytes=str(8 * GIB), memory__usage_in_bytes=str(3 * GIB),
          memory__stat="total_inactive_file 0")
    write(fs / "memory/slurm/job_1", memory__limit_in_bytes=str(3 * GIB),
          memory__usage_in_bytes=str(int(2.75 * GIB)),
          memory__stat=f"cache 100\ntotal_inactive_file {GIB // 4}\ntotal_shmem {GIB}")
    write(fs / "memory/slurm/job_1/step_0", memory__limit_in_bytes=UNLIMITED_V1,
          memory__usage_in_bytes=str(GIB), memory__stat="total_inactive_file 0")
    got = cgroup.read(proc, info)
    assert got.memory == cgroup.MemoryRoom(3 * GIB, int(2.5 * GIB), str(fs / "memory/slurm/job_1"))
    assert got.memory.room == GIB // 2
    assert got.memory_limit.limit == 3 * GIB


def test_v1_the_lowest_limit_need_not_be_the_least_room(tmp_path):
    """The parent is nearly full under a higher limit: its room binds the ceiling, while a
    --max-memory is refused past the child's lower limit."""
    fs, proc, info = v1_tree(tmp_path, memory_path="/a/b")
    write(fs / "memory/a", memory__limit_in_bytes=str(2 * GIB), memory__usage_in_bytes=str(2 * GIB - GIB // 10))
    write(fs / "memory/a/b", memory__limit_in_bytes=str(GIB), memory__usage_in_bytes=str(GIB // 8))
    got = cgroup.read(proc, info)
    assert got.memory.path == str(fs / "memory/a") and got.memory.room == GIB // 10
    assert got.memory_limit.limit == GIB and got.memory_limit.path == str(fs / "memory/a/b")


def test_v1_cpu_quota_nested_and_cpuset(tmp_path):
    """The quota of a parent binds its child (a systemd slice without a cgroup namespace); the
    cpuset's effective CPUs are counted."""
    fs, proc, info = v1_tree(tmp_path, cpu_path="/system.slice/job.scope", cpuset_path="/pinned")
    write(fs / "cpu,cpuacct", cpu__cfs_quota_us="-1", cpu__cfs_period_us="100000")
    write(fs / "cpu,cpuacct/system.slice", cpu__cfs_quota_us="150000", cpu__cfs_period_us="100000")
    write(fs / "cpu,cpuacct/system.slice/job.scope", cpu__cfs_quota_us="400000", cpu__cfs_period_us="100000")
    write(fs / "cpuset", cpuset__effective_cpus="0-63")
    write(fs / "cpuset/pinned", cpuset__effective_cpus="0-2,5,7-8", cpuset__cpus="0-15")
    got = cgroup.read(proc, info)
    assert got.cpu_quota == pytest.approx(1.5)
    assert got.cpuset == 6
    assert got.memory is None


def test_a_container_sees_its_own_cgroup_as_the_mount_root(tmp_path):
    """Docker without a cgroup namespace: /proc/self/cgroup names /docker/abc, and the mount shows
    that folder as its root; the limit is read at the mount point."""
    fs, proc, info = v1_tree(tmp_path, memory_path="/docker/abc", mount_root="/docker/abc")
    write(fs / "memory", memory__limit_in_bytes=str(int(1.5 * GIB)), memory__usage_in_bytes=str(GIB // 4))
    got = cgroup.read(proc, info)
    assert got.memory.limit == int(1.5 * GIB) and got.memory.path == str(fs / "memory")


def test_v2_nested_memory_quota_and_cpuset(tmp_path):
    fs, proc, info = v2_tree(tmp_path, "/kubepods.slice/pod1/ctr")
    write(fs, cgroup__controllers="cpuset cpu memory", cpuset__cpus__effective="0-7")
    write(fs / "kubepods.slice", memory__max="max", memory__current=str(4 * GIB), cpu__max="max 100000",
          memory__stat="inactive_file 0")
    write(fs / "kubepods.slice/pod1", memory__max=str(2 * GIB), memory__current=str(GIB),
          memory__stat=f"anon 1\ninactive_file {GIB // 2}", cpu__max="50000 100000", cpuset__cpus__effective="2-3")
    write(fs / "kubepods.slice/pod1/ctr", memory__max="max", memory__current=str(GIB), cpu__max="max 100000")
    got = cgroup.read(proc, info)
    assert got.memory == cgroup.MemoryRoom(2 * GIB, GIB // 2, str(fs / "kubepods.slice/pod1"))
    assert got.cpu_quota == pytest.approx(0.5)
    assert got.cpuset == 2


def test_v1_controller_missing_falls_back_to_v2(tmp_path):
    """A hybrid machine whose memory controller is on the v2 hierarchy only."""
    fs = tmp_path / "fs"
    (tmp_path / "mountinfo").write_text(f"41 31 0:38 / {fs}/unified rw - cgroup2 cgroup2 rw\n"
                                        f"32 31 0:29 / {fs}/cpu rw - cgroup cgroup rw,cpu\n")
    (tmp_path / "cgroup").write_text("2:cpu:/\n0::/user.slice\n")
    write(fs / "unified/user.slice", memory__max=str(GIB), memory__current=str(GIB // 4))
    write(fs / "cpu", cpu__cfs_quota_us="-1", cpu__cfs_period_us="100000")
    got = cgroup.read(str(tmp_path / "cgroup"), str(tmp_path / "mountinfo"))
    assert got.memory.limit == GIB and got.cpu_quota is None


@pytest.mark.parametrize("text, count", [("0-3", 4), ("0-3,8,10-11", 7), ("5", 1), ("", None), ("x", None)])
def test_cpu_lists(text, count):
    assert cgroup.cpu_list_count(text) == count


def test_mount_paths_with_a_space(tmp_path):
    fs = tmp_path / "with space"
    (tmp_path / "mountinfo").write_text(f"41 31 0:38 / {str(fs).replace(' ', chr(92) + '040')} rw - cgroup2 cgroup2 rw\n")
    (tmp_path / "cgroup").write_text("0::/\n")
    write(fs, memory__max=str(GIB), memory__current="0")
    assert cgroup.read(str(tmp_path / "cgroup"), str(tmp_path / "mountinfo")).memory.limit == GIB


def fake_limits(monkeypatch, limit, used, quota=None, cpuset=None):
    room = cgroup.MemoryRoom(limit, used, "/sys/fs/cgroup/memory/job") if limit else None
    monkeypatch.setattr(cgroup, "read", lambda *a: cgroup.CgroupLimits(room, room, quota, cpuset))


def test_the_default_ceiling_is_the_tighter_of_ram_and_the_cgroups_room(monkeypatch, tmp_path):
    monkeypatch.setattr(hardware, "available_memory", lambda: 20 * GIB)
    fake_limits(monkeypatch, int(1.5 * GIB), GIB // 4)
    options = Options.build(60, 60, None, str(tmp_path / "out"), None)
    assert options.ceiling.by == "cgroup"
    assert options.limits.max_memory == int(CGROUP_SHARE * (int(1.5 * GIB) - GIB // 4))
    assert options.limits.max_memory <= 1.5 * GIB
    fake_limits(monkeypatch, 64 * GIB, GIB)
    options = Options.build(60, 60, None, str(tmp_path / "out"), None)
    assert options.ceiling.by == "ram" and options.limits.max_memory == int(0.6 * 20 * GIB)


def test_max_memory_past_the_cgroups_limit_is_refused(monkeypatch, tmp_path):
    fake_limits(monkeypatch, int(1.5 * GIB), GIB // 2)
    with pytest.raises(UsageError) as caught:
        Options.build(60, 60, "2G", str(tmp_path / "out"), None)
    text = str(caught.value)
    assert "cgroup's memory limit, 1.50 GiB" in text and "2G" in text and "--max-memory 1024M" in text
    options = Options.build(60, 60, "1G", str(tmp_path / "out"), None)
    assert options.ceiling.by == "given" and options.limits.max_memory == GIB


def test_usable_cpus_takes_the_tightest(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    fake_limits(monkeypatch, None, 0, quota=2.5, cpuset=4)
    assert hardware.usable_cpus() == 3
    fake_limits(monkeypatch, None, 0, quota=None, cpuset=2)
    assert hardware.usable_cpus() == 2
    fake_limits(monkeypatch, None, 0, quota=0.2, cpuset=None)
    assert hardware.usable_cpus() == 1
    monkeypatch.setattr(os, "process_cpu_count", lambda: 1, raising=False)
    fake_limits(monkeypatch, None, 0)
    assert hardware.usable_cpus() == 1


def test_the_start_line_says_what_set_the_ceiling():
    from events_cases import INFO

    from autoloader.events import TuneStarted
    from autoloader.events.lines import line

    said = line(TuneStarted("ds", INFO, cpus=2, budget=60.0, max_memory=int(1.2 * GIB), ceiling_by="cgroup",
                            cgroup_limit=int(1.5 * GIB)))
    assert "memory ceiling 1.20 GiB, set by the cgroup's limit of 1.50 GiB)" in said
    assert "memory ceiling 8.00 GiB, set by --max-memory)" in line(
        TuneStarted("ds", INFO, cpus=2, budget=60.0, max_memory=8 * GIB, ceiling_by="given"))
    assert "memory ceiling 8.00 GiB, set by the RAM available)" in line(
        TuneStarted("ds", INFO, cpus=2, budget=60.0, max_memory=8 * GIB, ceiling_by="ram"))


# --- real cgroups: a child of this process's own cgroup, a subprocess moved into it -------------

def _own_folder(controller: str) -> tuple[str, bool] | str:
    """This process's cgroup folder for ``controller`` and whether it is v2's, or why there is none
    a child can be made under."""
    try:
        paths, mounts = cgroup._cgroup_paths(cgroup.PROC_CGROUP), cgroup._mounts(cgroup.MOUNTINFO)
    except OSError as exc:
        return f"no cgroup information ({exc})"
    if controller in paths and controller in mounts:
        levels = cgroup._levels(mounts[controller], paths[controller])
        return (levels[0], False) if levels else f"this process's {controller} cgroup is not under its mount"
    if "" in paths and "" in mounts:
        levels = cgroup._levels(mounts[""], paths[""])
        if levels and controller in (cgroup._read(levels[0], "cgroup.controllers") or "").split():
            return levels[0], True
    return f"no {controller} controller this process can make a child cgroup in"


@contextlib.contextmanager
def child_cgroup(controller: str, **settings: str):
    """A child cgroup of this process's own, with ``settings`` written (file name: value), removed
    after; the test is skipped with the reason where one cannot be made (not root, no controller,
    a v2 parent that takes no children)."""
    found = _own_folder(controller)
    if isinstance(found, str):
        pytest.skip(found)
    parent, v2 = found
    folder = os.path.join(parent, f"autoloader-test-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.mkdir(folder)
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup under {parent}: {exc}")
    try:
        for name, value in settings.items():
            name = {"memory": "memory.max" if v2 else "memory.limit_in_bytes",
                    "quota": "cpu.max" if v2 else "cpu.cfs_quota_us"}.get(name, name)
            if v2 and name == "cpu.max":
                value = f"{value} 100000"
            try:
                with open(os.path.join(folder, name), "w") as fh:
                    fh.write(value)
            except OSError as exc:
                pytest.skip(f"cannot set {name} in {folder}: {exc}")
        yield folder, v2
    finally:
        for _ in range(50):   # the processes moved in must have exited before the folder goes
            try:
                os.rmdir(folder)
                break
            except OSError:
                time.sleep(0.2)


def run_inside(folders: list[str], args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``args`` run in a subprocess moved into each of ``folders`` (one per hierarchy) before it starts."""
    def enter():
        for folder in folders:
            with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.run(args, cwd=REPO_ROOT, env=env, preexec_fn=enter, capture_output=True, text=True,
                          timeout=timeout)


def oom_kills(folder: str, v2: bool) -> int:
    text = cgroup._read(folder, "memory.events" if v2 else "memory.oom_control") or ""
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill ")), 0)


TUNE = [sys.executable, "-m", "autoloader.cli", "tune", "--device", "cpu", "--json"]


@pytest.mark.slow
def test_inside_a_memory_cgroup_the_ceiling_is_the_cgroups(tmp_path):
    """In a 1.5 GiB memory cgroup on a machine of far more RAM, the default ceiling is at most
    1.5 GiB and the start line and the result say the cgroup set it; a --max-memory past the
    limit is refused with exit 2."""
    with child_cgroup("memory", memory=str(int(1.5 * GIB))) as (folder, v2):
        done = run_inside([folder], [*TUNE, "--dataset", f"{WORKLOADS}:tiny", "--budget", "40",
                                     "--out", str(tmp_path / "out")], timeout=300)
        refused = run_inside([folder], [*TUNE, "--dataset", f"{WORKLOADS}:tiny", "--max-memory", "2G",
                                        "--out", str(tmp_path / "refused")], timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    said = re.search(r"memory ceiling ([0-9.]+) GiB, set by the cgroup's limit of 1\.50 GiB\)", done.stderr)
    assert said, done.stderr[-3000:]
    assert float(said.group(1)) <= 1.5
    result = json.loads(done.stdout)
    with open(result["path"]) as fh:
        inputs = json.load(fh)["inputs"]
    assert inputs["max_memory_by"] == "cgroup" and inputs["max_memory"] <= 1.5 * GIB
    assert inputs["cgroup_limit"] == int(1.5 * GIB)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "the cgroup's memory limit, 1.50 GiB" in refused.stderr and "Fix:" in refused.stderr


@pytest.mark.slow
def test_inside_a_one_cpu_quota_the_tune_sees_one_cpu(tmp_path):
    """A child cgroup of 100 ms a 100 ms period (one CPU's time) on the 2-core machine: the
    hardware reader and the tune see 1 CPU."""
    with child_cgroup("cpu", quota="100000") as (folder, v2):
        seen = run_inside([folder], [sys.executable, "-c", "from autoloader.inputs import hardware; "
                                     "print(hardware.usable_cpus(), hardware.cpu_quota())"], timeout=60)
        done = run_inside([folder], [*TUNE, "--dataset", f"{WORKLOADS}:tiny", "--budget", "40",
                                     "--out", str(tmp_path / "out")], timeout=300)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == ["1", "1.0"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(1 CPU, budget" in done.stderr, done.stderr[-3000:]
    assert json.loads(done.stdout)["hardware"]["cpus"] == 1


@pytest.mark.slow
def test_workers_that_would_pass_the_cgroups_limit_are_never_started_past_it(tmp_path):
    """Each worker of the dataset holds 300 MiB and more workers read faster; in a 1.5 GiB cgroup
    the configs of many workers would pass the limit. The tune ends with a pick, the kernel's OOM
    killer never acted in the cgroup, and no trial's processes held more than the ceiling."""
    with child_cgroup("memory", memory=str(int(1.5 * GIB))) as (folder, v2):
        done = run_inside([folder], [*TUNE, "--dataset", f"{WORKLOADS}:heavy_workers", "--batch-size", "16",
                                     "--budget", "45", "--out", str(tmp_path / "out")], timeout=400)
        killed = oom_kills(folder, v2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert killed == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    with open(result["path"]) as fh:
        stored = json.load(fh)
    ceiling = stored["inputs"]["max_memory"]
    assert stored["inputs"]["max_memory_by"] == "cgroup" and ceiling <= 1.5 * GIB
    trials = stored["trials"]
    # The many-worker configs were kept out (the model's pick of 8 workers forecasts some 4 GiB).
    assert any(t["status"] == "constraint" for t in trials), [(t["config"], t["status"]) for t in trials]
    assert not any(t["status"] == "failed" for t in trials), [(t["config"], t["error"]) for t in trials]
    assert all((t.get("peak_pss_bytes") or 0) <= ceiling for t in trials if t["status"] == "ok")
