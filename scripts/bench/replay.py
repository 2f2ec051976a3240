"""Would this checkout's tuner have decided as the recorded one did, given the same measurements?

    python -m scripts.bench replay results/benchmarks/run-X/part*/records.jsonl > replay.md

A bench run records, for each workload, the tuner's trials in the order it ran them, its final
rounds and its pick. This feeds those measurements to the search strategy and the final's choice
of the code checked out here and prints, per tuner run, where they decide differently:

- search: at each step, the config the strategy proposes after the trials before it, against the
  trial that was run there (a difference means the search would have measured something else
  from there on, so the replay reports the first one only);
- finalists: the configs the final would hold, against the recorded final's, in order (a final
  the tuner cut to its first two for time shows as a difference: the replay has no clock);
- pick: the choice made from the recorded final rounds, against the recorded pick. Runs from
  before the final recorded the consumer's waits (e1fa24a) cannot be judged by NOTE [ Keeping up ]
  when a trial kept up, so their pick is reported as not replayable.

When all three agree, a change to the search or the choice made since the run did not change
what that run measured or picked, so its figures stand for the new code. The replay checks
decisions, not timing: the budget, the time kept back for the final (it grows with the number of
finalists) and how long each trial took are the recorded run's, and what the search would have
proposed after its last recorded trial is not asked. Only each workload's first tune (phase
``tuner``) is replayed, not the extra tunes of ``--stability``. Measures nothing. Every name taken
from the tuner comes through ``decide`` (one file to mend when the tuner's insides move).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from . import decide
from .common import config_from_kwargs, short
from .records import read_records


@dataclass(frozen=True)
class Replay:
    """One recorded tuner run, decided again by this checkout's code."""
    source: str
    workload: str
    trials: int
    first_search_difference: str | None   # "step N: ran X, now proposes Y", or None
    recorded_finalists: tuple[str, ...]
    finalists: tuple[str, ...]
    recorded_pick: str
    pick: str | None                      # None when there is no final to choose from
    pick_note: str | None = None          # why the pick could not be replayed, if so

    @property
    def finalists_agree(self) -> bool:
        return self.recorded_finalists == self.finalists

    @property
    def agrees(self) -> bool:
        return (self.first_search_difference is None and self.finalists_agree and self.pick_note is None
                and (self.pick is None or self.pick == self.recorded_pick))


def replay(source: str, workload: str, tuner: dict) -> Replay:
    """Decide ``tuner`` (a tuner record's JSON: trials, finals, config, hardware) again."""
    trials = [decide.trial_from_dict(t) for t in tuner["trials"]]
    pick = config_from_kwargs(tuner["config"])
    cpus = int(tuner["hardware"]["cpus"])
    # The bench tunes with --batch-size B on CUDA: the space a tuning run there searches.
    strategy = decide.strategy(pick.batch_size, cpus, "cuda")
    difference = None
    for index, trial in enumerate(trials):
        proposed = strategy.propose(trials[:index])
        if proposed != trial.config:
            difference = (f"step {index + 1}: ran {short(trial.config)}, now proposes "
                          f"{short(proposed) if proposed else 'nothing'}")
            break
    finals = [decide.final_round(config_from_kwargs(f["config"]), f["rates"], f.get("waits") or ())
              for f in tuner["finals"]]
    note = None
    if any(not f.waits for f in finals) and any(decide.keeps_up(t) for t in trials):
        note = "not replayable: a trial kept up, and the final recorded no waits"
    chosen = decide.choose(finals, trials) if finals and note is None else None
    return Replay(source, workload, len(trials), difference,
                  tuple(short(f.config) for f in finals), tuple(short(c) for c in decide.finalists(trials)),
                  short(pick), short(chosen) if chosen else None, note)


def replays(paths: list[str]) -> list[Replay]:
    return [replay(path, record["workload"], record["tuner"]) for path in paths for record in read_records([path])
            if record.get("phase") == "tuner" and isinstance(record.get("tuner"), dict)]


def report(found: list[Replay], command: str) -> str:
    lines = ["# Replay of recorded tuner runs against this checkout's search and choice", "",
             f"Made with `{command}`. See the script's docstring for what each column compares.", "",
             "| records | workload | trials | search | finalists (recorded -> now) | pick (recorded -> now) | same decisions |",
             "|---|---|---|---|---|---|---|"]
    for r in found:
        finalists = ", ".join(r.recorded_finalists) + (
            "" if r.finalists_agree else " -> " + ", ".join(r.finalists))
        pick = r.recorded_pick + (f" ({r.pick_note})" if r.pick_note else
                                  "" if r.pick in (None, r.recorded_pick) else f" -> {r.pick}")
        lines.append(f"| {r.source} | {r.workload} | {r.trials} | {r.first_search_difference or 'same'} | "
                     f"{finalists} | {pick} | {'yes' if r.agrees else 'no'} |")
    same = sum(r.agrees for r in found)
    lines += ["", f"{same} of {len(found)} tuner run(s) decided the same."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(report(replays(argv), "python -m scripts.bench replay " + " ".join(argv)), end="")
    return 0
