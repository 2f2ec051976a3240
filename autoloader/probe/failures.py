"""Naming how a trial failed: from the exception a trial raised, or from how its process died.

A trial's failure is stored as a cause (a key of ``results.CAUSES``) and a message for the user.
An exception raised in the trial process is described there (``describe_failure``) and its
cause named from the text (``classify_failure``); a trial process that died is named by the
driver from its exit code (``death_cause``, ``death_text``).
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
    """The signal that ended a process, from multiprocessing's exit code (-N for signal N):
    its name ("SIGSEGV"), or described, the C library's words for it ("Segmentation fault");
    None when the process exited rather than being signalled."""
    if exitcode is None or exitcode >= 0:
        return None
    number = -exitcode
    try:
        return (signal.strsignal(number) if described else signal.Signals(number).name) or f"signal {number}"
    except ValueError:
        return f"signal {number}"


def exit_text(exitcode: int | None) -> str:
    """How a process ended, for a message: its signal's name, or its exit code."""
    return signal_name(exitcode) or f"exit code {exitcode}"


def death_cause(exitcode: int | None) -> str:
    """The cause of a trial whose trial process died: a bus error is what touching a page of a
    full /dev/shm raises; anything else is the process killed or crashed."""
    return "shm_exhausted" if exitcode == -signal.SIGBUS else "runner_killed"


def death_text(exitcode: int | None) -> str:
    """The message of a trial whose trial process died, with the usual reason for its signal."""
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
    """How the DataLoader's failed workers ended (their exit codes, -N for signal N), from its own
    frames (``failed_workers``): its Python-side message says only "exited unexpectedly", which
    hides a segfault, a bus error or a worker out of file descriptors."""
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


def _dead_worker_signals(codes: list[int]) -> list[str]:
    """The signals among the failed workers' exit codes, in the C library's words."""
    return [text for text in (signal_name(code, described=True) for code in codes) if text]


def worker_out_of_descriptors(exc: BaseException) -> bool:
    """Whether a DataLoader worker of the trial ended with OUT_OF_DESCRIPTORS_EXIT, as DataLoader
    saw it: its failed workers' exit codes, or the SIGCHLD handler's "exit code N"."""
    chain = _exception_chain(exc)
    said = f"exited unexpectedly with exit code {OUT_OF_DESCRIPTORS_EXIT}."
    return OUT_OF_DESCRIPTORS_EXIT in _dead_worker_codes(chain) or any(said in str(e) for e in chain)


def handover_lost(exc: BaseException) -> bool:
    """Whether the trial process lost a batch's hand-over from a worker: an EOFError or a broken
    connection, or anything raised while it fetched a descriptor the worker shares (its resource
    sharer's socket gone with the worker): what a worker that ended mid-hand-over leaves, its
    reason told by its exit code alone (``workers.ended_out_of_descriptors``)."""
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
    """(what to tell the user, what to classify) for an exception raised in a trial.

    The message is the most specific in the chain: the SIGCHLD handler's "killed by signal:
    Segmentation fault" over the "exited unexpectedly" wrapped around it, and for an exception
    re-raised from a worker, the worker's own last line. The classification text is the whole
    chain with full tracebacks (a collate_fn frame deep in the stack decides collate vs
    __getitem__) plus how dead workers died.
    """
    chain = _exception_chain(exc)
    texts = [f"{type(e).__name__}: {e}".strip() for e in chain]
    message = next((t for t in texts if "killed by signal" in t.lower()), texts[0])
    signals = _dead_worker_signals(_dead_worker_codes(chain))
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
    if out_of_descriptors(exc):   # in a worker: its own exception, re-raised here
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


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether an exception (or one in its chain, or a worker's re-raised text) says EMFILE."""
    return any((isinstance(e, OSError) and e.errno == errno.EMFILE) or "too many open files" in str(e).lower()
               for e in _exception_chain(exc))


def _worker_message(text: str) -> str:
    """A worker's exception as DataLoader re-raised it ("Caught X in DataLoader worker process
    N. Original Traceback ...", the traceback in the text): the cause's own line ("X: what it
    said", the first line after the traceback's last frame), whole, and where it came from;
    none of the traceback."""
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
    """The one line a failure is told in (``describe_failure``'s message): for a profile that
    failed as for a trial."""
    return describe_failure(exc)[0]


def raised_os_error(exc: BaseException) -> bool:
    """Whether a trial's exception was an OSError (a missing file, a mount gone, a permission),
    anywhere in its chain or as the worker's own exception that DataLoader re-raised: a failure
    of the environment, which can be fixed without changing the code (store/retry.py)."""
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
    """Name the cause of an exception raised in a trial from where it came and what it says.

    ``where`` is "iter" (starting the loader), "next" (fetching a batch) or "step" (the
    consumer). ``message`` is best the whole exception chain with full tracebacks
    (``describe_failure``'s detail): a worker's exception arrives re-raised with the worker's
    traceback in its text, and the frames tell a collate_fn failure from a __getitem__ one, and
    both from the sampler (DataLoader's ``_next_index``).
    """
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
