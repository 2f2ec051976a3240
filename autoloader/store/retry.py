"""Which stored verdicts still stand, and which configs are measured again.

A finished trial is a fact about its config and is not re-run (NOTE [ Nothing lost ] in
study.py), with these exceptions, each counted so the progress line can say why a config runs
again:
- a limit's verdict (memory ceiling, watchdog) once that limit is raised (study.py's
  ``stopped_by_a_raised_limit``);
- a failure of the user's code (USER_CODE_CAUSES) once that code changed: NOTE [ Failures keyed
  by code ] in inputs/code_digest.py;
- a failure of the environment, once, in a resumed run: NOTE [ Fixed outside the code ];
- a crash (FLAKY_CAUSES) seen once: NOTE [ A crash counts twice ];
- and, when the search knows its rule, a stored failure of the rule (``rule_again``).

# NOTE [ Fixed outside the code ]
# A failure can be fixed without touching the code (a file restored, a mount back, a permission
# or a variable set), and the code's digest does not change. So a trial that failed on an OSError
# (``TrialResult.os_error``: its exception, or the worker's) is measured again by the run that
# resumes its study (in the run that measured it, it stands: the environment is as it was), and
# so is a stored failure of the rule: the final must hold the pick against the rule.

# NOTE [ A crash counts twice ]
# A worker killed by a signal, a segfault or a trial process that died can be a one-off (the OOM
# killer's choice, a race in native code). So a config's crash stands only once it happened twice:
# the first is recorded in the study but kept out of the history the strategy sees, so the
# strategy proposes the same config again at once; a second crash counts. A run killed between
# the two leaves one crash stored, which the next run treats the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..search.results import FAILED, HANG, TrialResult
from ..search.space import LoaderConfig

# Failures the user's code caused: they stand only while that code is unchanged.
USER_CODE_CAUSES = frozenset({"dataset_error", "collate_error", "sampler_error", "step_error", "error"})
# Crashes that can be one-offs: they stand once seen twice for a config.
FLAKY_CAUSES = frozenset({"worker_killed", "worker_segfault", "runner_killed"})


@dataclass(frozen=True)
class StoredTrial:
    """One finished trial as the study holds it: its result, the limits and the code it ran under."""
    result: TrialResult
    limits: dict | None = None
    code: str | None = None


@dataclass(frozen=True)
class History:
    """The stored trials that stand, in order, and how many were left out and why."""
    trials: tuple[TrialResult, ...] = ()
    limit_raised: int = 0       # a limit's verdict under a limit since raised
    code_changed: int = 0       # a failure of the user's code, which has changed since
    crashed_once: tuple[LoaderConfig, ...] = ()   # configs with one crash: tried once more
    invalid: int = 0            # records that failed validation (warned about, ignored)
    environment: int = 0        # a failure of the environment (an OSError): NOTE [ Fixed outside the code ]


def code_changed(result: TrialResult, recorded: str | None, now: str | None) -> bool:
    """Whether ``result`` is a failure of the user's code that ran other code than ``now`` (one
    without a digest counts as changed: measuring once more costs one trial)."""
    if now is None or result.status != FAILED or result.cause not in USER_CODE_CAUSES:
        return False
    return recorded != now


def standing(stored: Sequence[StoredTrial], limit_raised: Callable[[TrialResult, dict | None], bool],
             code: str | None, invalid: int = 0) -> History:
    """Each config's newest result, unless one of the module's exceptions puts it aside.
    ``limit_raised(result, recorded_limits)`` is the limits' rule (study.py)."""
    newest = {s.result.config: i for i, s in enumerate(stored)}
    crashes = Counter(s.result.config for s in stored if _is_crash(s.result))
    trials, raised, changed, once, environment = [], 0, 0, [], 0
    for i, s in enumerate(stored):
        if newest[s.result.config] != i:
            continue    # superseded: measured again since
        if limit_raised(s.result, s.limits):
            raised += 1
        elif code_changed(s.result, s.code, code):
            changed += 1
        elif _is_crash(s.result) and crashes[s.result.config] < 2:
            once.append(s.result.config)
        elif environment_failed(s.result):
            environment += 1
        else:
            trials.append(s.result)
    return History(tuple(trials), raised, changed, tuple(once), invalid, environment)


def environment_failed(result: TrialResult) -> bool:
    """A failure on an OSError, not a crash: NOTE [ Fixed outside the code ]."""
    return result.status == FAILED and result.os_error and result.cause not in FLAKY_CAUSES


def rule_again(trials: Sequence[TrialResult], rule: LoaderConfig | None) -> tuple[list[TrialResult],
                                                                                        TrialResult | None]:
    """A resumed run's stored trials less a failure (or hang) of the rule, which is measured
    again, and that failure (NOTE [ Fixed outside the code ])."""
    failed = next((t for t in trials if t.config == rule and t.status in (FAILED, HANG)), None)
    return [t for t in trials if t is not failed], failed


def _is_crash(result: TrialResult) -> bool:
    return result.status == FAILED and result.cause in FLAKY_CAUSES


@dataclass
class OnceMore:
    """Whether a finished trial enters the history now (NOTE [ A crash counts twice ])."""
    crashed: set = field(default_factory=set)

    def stands(self, result: TrialResult) -> bool:
        """False for a config's first crash (it is tried once more); True otherwise."""
        if not _is_crash(result) or result.config in self.crashed:
            return True
        self.crashed.add(result.config)
        return False
