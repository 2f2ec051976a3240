"""The limits the kernel enforces on this process: its cgroup's memory limit, CPU quota and cpuset.

# NOTE [ Reading the cgroup ]
# A container (Docker, Kubernetes), a Slurm job step or a systemd slice puts the process in a
# cgroup whose limits the host's figures do not show: the kernel's OOM killer acts at the cgroup's
# memory limit, not at the host's RAM, and a CPU quota throttles past its share whatever the
# affinity says. The cgroup's path comes from /proc/self/cgroup (one line per v1 hierarchy,
# ``0::path`` for v2), relative to its hierarchy's root; /proc/self/mountinfo says where each
# hierarchy is mounted and which part of it the mount shows (a container sees its own cgroup as
# the mount's root). Every level from the process's own cgroup up to the mount's root is read,
# since a parent's limit binds its children (a job step inside a job inside a slice), and the
# tightest wins:
#  * memory: each level's room is its limit less what it already holds, less the page cache it
#    can reclaim (``inactive_file``, as the kubelet counts a working set). /dev/shm is tmpfs: its
#    pages are charged to the cgroup that wrote them, as shmem, which is not reclaimable, so what
#    the cgroup's processes keep there is counted against its room;
#  * CPUs: the CFS quota over its period (v1 ``cpu.cfs_quota_us``, v2 ``cpu.max``) and the
#    cpuset's CPUs (``cpuset.effective_cpus``, v2 ``cpuset.cpus.effective``).
# Anything that cannot be read (no cgroup, no mount, a file missing) is no limit: the host's
# figures stand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC_CGROUP = "/proc/self/cgroup"
MOUNTINFO = "/proc/self/mountinfo"
# cgroup v1 writes "no limit" as the largest page-aligned 64-bit count; anything this large is none.
NO_LIMIT = 2**62


@dataclass(frozen=True)
class MemoryRoom:
    """A cgroup level's memory limit: ``limit`` bytes at ``path``, of which it already holds
    ``used`` (less its reclaimable page cache); ``room`` is what is left."""
    limit: int
    used: int
    path: str

    @property
    def room(self) -> int:
        return max(0, self.limit - self.used)


@dataclass(frozen=True)
class CgroupLimits:
    """What the process's cgroup allows, each the tightest over every level up to the root (None:
    no limit): ``memory`` the level with the least room, ``memory_limit`` the lowest limit (the
    level with the least room need not have it), ``cpu_quota`` in CPUs' worth of time,
    ``cpuset`` the count of CPUs it may run on."""
    memory: MemoryRoom | None = None
    memory_limit: MemoryRoom | None = None
    cpu_quota: float | None = None
    cpuset: int | None = None


def _unescape(path: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        path = path.replace(code, chr(int(code[1:], 8)))
    return path


def _mounts(mountinfo: str) -> dict[str, tuple[str, str]]:
    """{controller (or "" for the v2 hierarchy): (mount point, the hierarchy's path it shows)}."""
    mounts: dict[str, tuple[str, str]] = {}
    with open(mountinfo) as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            root, point = _unescape(fields[3]), _unescape(fields[4])
            if tail[0] == "cgroup2":
                mounts.setdefault("", (point, root))
            elif tail[0] == "cgroup":
                for option in tail[2].split(","):
                    mounts.setdefault(option, (point, root))
    return mounts


def _levels(mount: tuple[str, str], path: str) -> list[str]:
    """The folders of the cgroup at ``path`` and every parent up to the mount's root, its own
    first; empty where the mount does not show it."""
    point, root = mount
    root = root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return []
    inner = [part for part in path[len(root):].split("/") if part]
    return [os.path.join(point, *inner[:i]) for i in range(len(inner), -1, -1)]


def _cgroup_paths(proc_cgroup: str) -> dict[str, str]:
    """{controller (or "" for v2): the cgroup's path in its hierarchy} from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with open(proc_cgroup) as fh:
        for line in fh:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            _, controllers, path = parts
            if not controllers:
                paths.setdefault("", path)
            for name in controllers.split(","):
                if name:
                    paths.setdefault(name, path)
    return paths


def _read(folder: str, name: str) -> str | None:
    try:
        with open(os.path.join(folder, name)) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _stat(folder: str, name: str, key: str) -> int:
    text = _read(folder, name) or ""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _memory_level(folder: str, v2: bool) -> MemoryRoom | None:
    limit_text = _read(folder, "memory.max" if v2 else "memory.limit_in_bytes")
    usage_text = _read(folder, "memory.current" if v2 else "memory.usage_in_bytes")
    if not limit_text or not usage_text or not limit_text.isdigit() or not usage_text.isdigit():
        return None   # "max", missing or unreadable: no limit here
    limit = int(limit_text)
    if limit >= NO_LIMIT:
        return None
    cache = _stat(folder, "memory.stat", "inactive_file" if v2 else "total_inactive_file")
    return MemoryRoom(limit, max(0, int(usage_text) - cache), folder)


def _quota_level(folder: str, v2: bool) -> float | None:
    if v2:
        parts = (_read(folder, "cpu.max") or "").split()
        if len(parts) < 2 or parts[0] == "max":
            return None
        quota_text, period_text = parts[:2]
    else:
        quota_text, period_text = _read(folder, "cpu.cfs_quota_us"), _read(folder, "cpu.cfs_period_us")
    try:
        quota, period = int(quota_text or ""), int(period_text or "")
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def cpu_list_count(text: str) -> int | None:
    """The CPUs a list such as ``0-3,8,10-11`` names (None: empty or not such a list)."""
    count = 0
    for part in (p.strip() for p in text.strip().split(",")):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        count += (int(high) - int(low) + 1) if high else 1
    return count or None


def _cpuset_level(folder: str, v2: bool) -> int | None:
    names = ("cpuset.cpus.effective", "cpuset.cpus") if v2 else ("cpuset.effective_cpus", "cpuset.cpus")
    for name in names:
        text = _read(folder, name)
        if text:
            return cpu_list_count(text)
    return None


def _tightest(values):
    values = [v for v in values if v is not None]
    return min(values) if values else None


def read(proc_cgroup: str = PROC_CGROUP, mountinfo: str = MOUNTINFO) -> CgroupLimits:
    """The limits of the cgroup this process is in, v1 or v2 (NOTE [ Reading the cgroup ])."""
    try:
        paths, mounts = _cgroup_paths(proc_cgroup), _mounts(mountinfo)
    except OSError:
        return CgroupLimits()

    def levels(controller: str) -> list[tuple[str, bool]]:   # (folder, whether it is v2's)
        if controller in paths and controller in mounts:
            return [(f, False) for f in _levels(mounts[controller], paths[controller])]
        if "" in paths and "" in mounts:
            return [(f, True) for f in _levels(mounts[""], paths[""])]
        return []

    rooms = [_memory_level(f, v2) for f, v2 in levels("memory")]
    rooms = [r for r in rooms if r is not None]
    memory = min(rooms, key=lambda r: r.room, default=None)
    lowest = min(rooms, key=lambda r: r.limit, default=None)
    return CgroupLimits(memory, lowest, _tightest(_quota_level(f, v2) for f, v2 in levels("cpu")),
                        _tightest(_cpuset_level(f, v2) for f, v2 in levels("cpuset")))
