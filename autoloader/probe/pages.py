"""A process's private memory by kind, from /proc/<pid>/smaps.

# NOTE [ Memory by kind ]
# A worker's private memory (USS: the pages no other process maps) is of three kinds, and only
# one of them is a copy:
# - anonymous pages (the heap, arenas, the stack, pages written in a private file mapping): its own
#   allocations and the pages it copied from the main process by writing to them, reference counts
#   included (NOTE [ Copy on read ] in search/growth.py). Only these are forecast as its growth;
# - pages of a mapped regular file (an np.memmap, Arrow's memory-mapped tables): the kernel's page
#   cache, mapped in as it reads. A page only this worker reads counts as private, yet nothing was
#   copied: one cached copy serves every process that maps it, reclaimed under memory pressure
#   (dirty or clean says nothing: a file just written holds dirty pages until writeback);
# - pages of shared-memory files (/dev/shm, memfd): the batches a worker made and hands over.
# smaps_rollup sums the kinds together, so the mappings are read one by one: one with no inode is
# anonymous; in a file's mapping its ``Anonymous`` pages (written in a private mapping) are copies
# and the rest the file's.
"""

from __future__ import annotations

from dataclasses import dataclass

# Shared-memory files, by the path their mapping shows.
SHARED_MEMORY = ("/dev/shm/", "/memfd:", "/SYSV", "/run/shm/")
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Pages:
    anon: int    # anonymous: its own allocations and what it copied
    file: int    # a mapped regular file's page cache, mapped by it alone so far
    shmem: int   # shared-memory files: batches in flight

    @property
    def uss(self) -> int:
        return self.anon + self.file + self.shmem


def private_pages(pid: int | str = "self") -> Pages | None:
    """None when it is gone (or the kernel has no smaps)."""
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            text = fh.read()
    except OSError:
        return None
    return parse_smaps(text)


def parse_smaps(text: str) -> Pages:
    anon = file = shmem = 0
    kind, private, dirty, anonymous = None, 0, 0, 0

    def close() -> None:
        nonlocal anon, file, shmem
        if kind == "anon":
            anon += private
        elif kind == "shmem":
            shmem += private
        elif kind == "file":
            copied = min(anonymous, dirty)
            anon += copied
            file += private - copied

    for line in text.splitlines():
        first = line[:1]
        if first == "P":
            if line.startswith("Private_"):
                value = int(line.split()[1]) * 1024
                private += value
                if line.startswith("Private_Dirty:"):
                    dirty = value
            continue
        if first == "A":
            if line.startswith("Anonymous:"):
                anonymous = int(line.split()[1]) * 1024
            continue
        if first not in _HEX:
            continue
        fields = line.split(None, 5)   # range perms offset dev inode [path]
        if len(fields) < 5 or "-" not in fields[0] or fields[0].endswith(":"):
            continue
        close()
        path = fields[5] if len(fields) > 5 else ""
        if fields[4] == "0":
            kind = "anon"
        elif path.startswith(SHARED_MEMORY):
            kind = "shmem"
        else:
            kind = "file"
        private = dirty = anonymous = 0
    close()
    return Pages(anon, file, shmem)
