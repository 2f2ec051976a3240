"""Naming how a trial failed, as a cause (a key of ``results.CAUSES``) and a message: from the
exception it raised in the trial process (``describe_failure``, ``classify_failure``), or from
the exit code of a trial process that died (``death_cause``, ``death_text``, in the driver).
"""

from __future__ import annotations

import errno
import signal
import traceback

from ..errors import clip

# The longest message a failure is told in: past it, cut at a word (``errors.clip``).
MESSAGE_LIMIT = 1000

# Words that tie an out-of-space error to shared memory rather than to a disk the dataset reads.
_SHM_MARKERS = ("/dev/shm", "shm", "shared memory", "torch_", "semlock", "sem_open")


def signal_name(exitcode: int | None, described: bool = False) -> str | None:
    """The signal of multiprocessing's exit code (-N for signal N): its name ("SIGSEGV"), or the C
    library's words ("Segmentation fault") when ``described``; None for an exit."""
    if exitcode is None or exitcode >= 0:
        return None
    number = -exitcode
    try:
        return (signal.strsignal(number) if described else signal.Signals(number).name) or f"signal {number}"
    except ValueError:
        return f"signal {number}"


def exit_text(exitcode: int | None) -> str:
    return signal_name(exitcode) or f"exit code {exitcode}"


def death_cause(exitcode: int | None) -> str:
    """A bus error is what touching a page of a full /dev/shm raises; else it was killed or crashed."""
    return "shm_exhausted" if exitcode == -signal.SIGBUS else "runner_killed"


def death_text(exitcode: int | None) -> str:
    why = {-signal.SIGKILL: ": the kernel's OOM killer, or another process",
           -signal.SIGSEGV: ": a native library in the dataset or step crashed",
           -signal.SIGBUS: ": /dev/shm is likely full"}.get(exitcode or 0, "")
    return f"the trial process died ({exit_text(exitcode)}{why})"


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _dead_worker_codes(chain: list[BaseException]) -> list[int]:
    """The failed workers' exit codes, from DataLoader's own frames (``failed_workers``): its
    message says only "exited unexpectedly", which hides a segfault or a bus error."""
    found = []
    for exc in chain:
        tb = exc.__traceback__
        while tb is not None:
            for worker in tb.tb_frame.f_locals.get("failed_workers", None) or ():
                code = getattr(worker, "exitcode", None)
                if code is not None and code not in found:
                    found.append(code)
            tb = tb.tb_next
    return found


def worker_out_of_descriptors(exc: BaseException) -> bool:
    """Whether a worker ended with OUT_OF_DESCRIPTORS_EXIT, as DataLoader saw it: its failed
    workers' exit codes, or the SIGCHLD handler's "exit code N"."""
    chain = _exception_chain(exc)
    said = f"exited unexpectedly with exit code {OUT_OF_DESCRIPTORS_EXIT}."
    return OUT_OF_DESCRIPTORS_EXIT in _dead_worker_codes(chain) or any(said in str(e) for e in chain)


def handover_lost(exc: BaseException) -> bool:
    """Whether a batch's hand-over from a worker was lost: an EOFError, a broken connection, or a
    raise while fetching a descriptor the worker shares (its resource sharer gone with it): what
    a worker that ended mid-hand-over leaves (``workers.ended_out_of_descriptors``)."""
    for e in _exception_chain(exc):
        if isinstance(e, (EOFError, ConnectionError)):
            return True
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith(_SHARER):
                return True
            tb = tb.tb_next
    return False


_SHARER = "multiprocessing/resource_sharer.py"


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """(what to tell the user, what to classify) for an exception raised in a trial: the chain's
    most specific message ("killed by signal: ..." over "exited unexpectedly", a worker's own last
    line), and the whole chain with full tracebacks (a collate_fn frame decides collate vs
    __getitem__) plus how dead workers died."""
    chain = _exception_chain(exc)
    texts = [f"{type(e).__name__}: {e}".strip() for e in chain]
    message = next((t for t in texts if "killed by signal" in t.lower()), texts[0])
    signals = [text for text in (signal_name(c, described=True) for c in _dead_worker_codes(chain)) if text]
    if signals and "killed by signal" not in message.lower():
        message = f"{message} (killed by signal: {', '.join(signals)})"
    worker = next((str(e) for e in chain if "Original Traceback" in str(e)), "")
    if worker and "killed by signal" not in message.lower():
        message = _worker_message(worker)
    detail = "".join(traceback.format_exception(exc))
    if signals:
        detail += "".join(f"\nDataLoader worker is killed by signal: {s}" for s in signals)
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    if worker_out_of_descriptors(exc):   # the worker's own exception is lost with it; its exit code says why
        return FD_EXHAUSTED_IN_WORKER, f"{detail}\n{FD_EXHAUSTED_IN_WORKER}"
    if says_emfile(exc):   # in a worker: its own exception, re-raised here
        first = f"{FD_EXHAUSTED_IN_WORKER if worker else FD_EXHAUSTED} ({first})"
    return clip(first or type(exc).__name__, MESSAGE_LIMIT), detail


# A dataset (or step) that opens files and never closes them runs its process out of file
# descriptors (EMFILE); the failure is said as its own, with the fix, not as a crash.
_FD_LEAK = ("ran out of file descriptors (EMFILE: Too many open files): the dataset {who} opens files and does "
            "not close them. Fix: close each file it opens (with open(...) as f:, or close it after reading), or "
            "raise the limit (ulimit -n)")
FD_EXHAUSTED = "the trial process " + _FD_LEAK.format(who="(or step)")
# A trial's DataLoader worker that ran out ends with an exit code of its own: NOTE [ A worker out of
# file descriptors ] in workers.py.
FD_EXHAUSTED_IN_WORKER = "a DataLoader worker of the trial " + _FD_LEAK.format(who="(or its collate_fn)")
OUT_OF_DESCRIPTORS_EXIT = errno.EMFILE


def says_emfile(exc: BaseException | None, text: bool = True) -> bool:
    """Whether an exception or one in its chain is EMFILE, or (``text``) says so: a worker's re-raised."""
    return any((isinstance(e, OSError) and e.errno == errno.EMFILE)
               or (text and "too many open files" in str(e).lower()) for e in _exception_chain(exc))


def _worker_message(text: str) -> str:
    """A worker's exception as DataLoader re-raised it ("Caught X in DataLoader worker process N.
    Original Traceback ..."): the cause's own line, whole, and where it came from."""
    head, _, rest = text.strip().partition("Original Traceback")
    head = head.strip().replace("Caught ", "").rstrip(".")
    lines = rest.splitlines()[1:]
    frames = [i for i, line in enumerate(lines) if line.lstrip().startswith("File ")]
    after = lines[frames[-1] + 1:] if frames else lines
    # The frame's code lines (and 3.11's ^^^ markers) are indented; the exception's are not.
    cause = next((line.strip() for line in after if line.strip() and not line[:1].isspace()), "")
    cause = cause or next((line.strip() for line in reversed(lines) if line.strip()), "")
    return f"{cause} ({head})" if cause else head


def failure_line(exc: BaseException) -> str:
    """``describe_failure``'s message: for a profile that failed as for a trial."""
    return describe_failure(exc)[0]


def raised_os_error(exc: BaseException) -> bool:
    """Whether a trial's exception was an OSError anywhere in its chain, or a worker's that
    DataLoader re-raised: the environment's, fixed without changing the code (store/study.py)."""
    import builtins

    for e in _exception_chain(exc):
        if isinstance(e, OSError):
            return True
        text = str(e)
        if "Original Traceback" in text:   # a worker's, re-raised as another type when its own would not build
            last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
            name = last.split(":", 1)[0].rsplit(".", 1)[-1]
            kind = getattr(builtins, name, None)
            if isinstance(kind, type) and issubclass(kind, OSError):
                return True
    return False


def classify_failure(message: str, where: str) -> str:
    """The cause of an exception raised in a trial, from ``where`` ("iter", "next" or "step") and
    ``message``, best ``describe_failure``'s detail: the frames in a worker's re-raised traceback
    tell collate_fn from __getitem__, and both from the sampler (DataLoader's ``_next_index``)."""
    text = message.lower()
    if FD_EXHAUSTED_IN_WORKER.lower() in text:   # a worker's exit code said it: describe_failure
        return "dataset_error"
    if "out of shared memory" in text or "bus error" in text or "insufficient shared memory" in text:
        return "shm_exhausted"
    if ("no space left on device" in text or "unable to allocate shared memory" in text
            or "unable to write to file" in text) and any(m in text for m in _SHM_MARKERS):
        return "shm_exhausted"
    if ("out of memory" in text and "cuda" in text) or "outofmemoryerror" in text:
        return "cuda_oom"
    if "segmentation fault" in text:
        return "worker_segfault"
    if "killed by signal" in text or "exited unexpectedly" in text:
        return "worker_killed"
    if where == "step":
        return "step_error"
    if "too many open files" in text:   # FD_EXHAUSTED: the dataset's leak, wherever it surfaced
        return "dataset_error"
    if "_next_index" in text:   # DataLoader asking the sampler: NOTE [ An iterator that raised while starting ]
        return "sampler_error"
    if where == "iter":
        return "error"           # starting the loader's workers raised
    if "collate" in text:
        return "collate_error"
    return "dataset_error"
