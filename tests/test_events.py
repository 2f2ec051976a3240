"""The progress events (autoloader/events): typed, dispatched by type, the CLI's lines unchanged,
the old two-argument callback still served, the log given every event, every event picklable."""

from __future__ import annotations

import dataclasses
import io
import logging
import pickle
import warnings

import pytest
from events_cases import RESULT, TRIAL, examples

from autoloader import events as ev
from autoloader.errors import UsageError
from autoloader.events.lines import line, rate
from autoloader.tuning.progress import LOGGER, ProgressPrinter, api_progress

# The lines the CLI printed for examples() before the events were typed (the old printer's
# output on each event's legacy() pair, which is what a two-argument callback still receives).
GOLDEN = [
    'autoloader: tuning ds-key on cpu (2 CPUs, budget 60 s, memory ceiling 8.00 GiB): 4,096 samples,'
     ' 1.20 ms and 3.0 KiB a sample, resuming 3 finished trials (2 interrupted trials marked failed)'
     ' (1 stopped by a limit since raised, measured again) (2 failed under code since changed,'
     ' measured again) (1 crashed once, tried once more) (1 failed on an OSError (a file, a mount, a'
     ' permission: fixed outside the code, maybe), measured again) (1 stored records invalid, ignored)',
    'autoloader: tuning ds-key on cpu (2 ranks at once (1 CPU and 4.00 GiB each; trial rates are'
     " the slowest rank's, the node's is 2x), budget 30 s, memory ceiling 8.00 GiB): 4,096 samples,"
     ' 1.20 ms and 3.0 KiB a sample',
    'autoloader: the study stopped taking writes (disk full); the search goes on without storing its'
     ' trials',
    'autoloader: pushed 3 trials to the fleet storage',
    '  profile [2.0s]: a sample 1.00 ms (p99 1.00, max 1.00; 90% on a CPU), a batch of 16 0.0 MiB:'
     ' receive 0.2 ms, step 2.0 ms, worker start 0.20 s, 2 CPUs; other processes used 1.5 of 2 CPUs'
     ' meanwhile',
    "  profile: not measured (the profile's batch raised); the bursts will correct a rough one",
    "  the cpus-1 rule's config bs16-w1-pin0-pf2-pw1 failed in the run resumed here (the dataset's"
     ' __getitem__ raised: boom); measuring it again, since the pick is held against it',
    '  trial 1 of ~6 [3s] bs16-w3-pin0-pf2-pw1: 1,234/s ±2% wait 25% | best bs16-w3-pin0-pf2-pw1'
     ' 1,234/s | other processes used 1.6 of 2 CPUs: the figure is what the machine gives beside them',
    "  trial 2 of ~6 [4s] bs16-w1-pin0-pf2-pw1: FAILED the dataset's __getitem__ raised: boom (a"
     ' crash can be a one-off: trying it once more) | best bs16-w3-pin0-pf2-pw1 1,234/s',
    '  final round 1 of at most 3 (interleaved): 16-3 1,200/s, 16-1 -',
    '  a busy machine (other processes used 1.4 of 2 CPUs): the configs that decide the pick'
     ' measured again, interleaved: 16-3, 16-1',
    None,
    'autoloader: using the stored result /home/r.json: bs16-w3-pin0-pf2-pw1 at 1,234/s (tuned on'
     ' cpu; delete it, or pass version=, to tune again)',
    'autoloader: tuning again: /home/r.json: measured with format 0',
    # The closing line (NOTE [ The closing line ] in api.py): new with the typed events.
    'autoloader: picked batch_size=16, num_workers=3, pin_memory=False, prefetch_factor=2, persistent_workers=True'
     ' (tuned now, 1,234/s; result /home/r.json)',
    'autoloader: applied batch_size=16, num_workers=3, pin_memory=False, prefetch_factor=2,'
     ' persistent_workers=True to the DataLoader returned (reused, 1,234/s; result /home/r.json)',
    "autoloader: applied batch_size=16, num_workers=3, pin_memory=False, prefetch_factor=2,"
     " persistent_workers=True to the Trainer's TrainingArguments (dataloader_*) (tuned now, 1,234/s; result"
     " not stored)",
    'autoloader: another process (pid 4242) is tuning this dataset into /home; waiting for it to'
     ' finish, then using its result (tunes of one problem take turns, so neither measures on cores'
     ' the other is using)',
    'autoloader: another process is tuning this dataset into /home; waiting for it to finish, then'
     ' measuring on its own (tunes of one problem take turns, so neither measures on cores the other'
     ' is using)',
    '  waiting for the trial process to start and build the dataset and step (31 s of at most 120 s,'
     ' clipped to the budget)',
    '  waiting for rank 1 of 2 to finish the trial (45 s; its process is stopped; given up after 300'
     ' s)',
    'autoloader retune [1/2] imagenet',
    "  ds-key: warm start this hardware's last result (/old.json): bs16-w3-pin0-pf2-pw1 at 1,234/s",
    '  imagenet: changed (samples/s -12%), the pick held (stopped early)',
    '  imagenet: FAILED building the dataset raised OSError: gone more',   # whole, on one line
    'autoloader: tuning before the run, not in it: an IterableDataset has no order to read in segments',
    'autoloader: tuning ds-key in the run, over the first epoch(s) of the loop: starting from num_workers=3,'
     " pin_memory=False, prefetch_factor=2, persistent_workers=True (a 7 ms profile's guess); one line says what"
     ' was picked',
    'autoloader: tuning ds-key in the run, over the first epoch(s) of the loop: starting from num_workers=1,'
     ' pin_memory=False, prefetch_factor=2, persistent_workers=True (the rule, without a profile); one line says'
     ' what was picked',
    None,   # a segment read: at DEBUG
    'autoloader: another process (pid 4242) is tuning ds-key into /home; this run trains with num_workers=3,'
     ' pin_memory=False, prefetch_factor=2, persistent_workers=True without tuning (two tunes of one problem would'
     " measure on each other's cores), and takes that tune's pick at the first epoch after it is stored",
    'autoloader: another process is tuning ds-key into /home; this run trains with num_workers=1,'
     ' pin_memory=False, prefetch_factor=2, persistent_workers=True without tuning (two tunes of one problem would'
     " measure on each other's cores), and takes that tune's pick at the first epoch after it is stored",
    'autoloader: from epoch 1, this run reads with num_workers=1, pin_memory=False, prefetch_factor=2: the pick'
     ' the other tune stored in /home/r.json',
    'autoloader: the other tune stored num_workers=3, pin_memory=False, prefetch_factor=2 in /home/r.json, but its'
     " memory forecast (3.0 GiB) is past this run's limit (2.0 GiB): this run goes on with num_workers=1,"
     ' pin_memory=False, prefetch_factor=2, untuned (pass max_memory= higher where the machine has the room, or'
     ' start this run after the other ends)',
    'autoloader: epoch 0 ended with the tune in the run still exploring (3 paired round(s) of 2 config(s) read,'
     ' num_workers=1, pin_memory=False, prefetch_factor=2 leading); it goes on in the next epoch(s) and says what'
     ' it picked once settled',
    None,   # settled: the closing line follows at the epoch's end
    'autoloader: tuned in the run over 2 epoch(s): tried num_workers=3, pin_memory=False, prefetch_factor=2'
     ' (start); num_workers=1, pin_memory=False, prefetch_factor=2 (the rule), climbing from the start (4 pair(s)'
     ' of readings of 1.5 s or more; no step left); picked num_workers=1, pin_memory=False, prefetch_factor=2;'
     ' faster than the start by 5-19%; the pick in the loop: 1,234 samples/s, waiting 5% of the time; tuning cost'
     ' +1.5 s of 60.0 s (+2%); stored /home/r.json',
    'autoloader: tuned in the run over 1 epoch(s): tried num_workers=3, pin_memory=False, prefetch_factor=2'
     " (start), climbing from the start (0 pair(s) of readings of 1.5 s or more; the run's epochs are read); picked"
     ' num_workers=3, pin_memory=False, prefetch_factor=2; no tuning cost: the 30.0 s took 0.4 s less than the'
     " pick's pace would; not started, past the memory forecast: num_workers=1, pin_memory=False,"
     ' prefetch_factor=2; not stored',
]


class Collected(logging.Handler):
    """The "autoloader" logger's records, whatever the application's logging (or pytest's) does."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logged():
    handler, level = Collected(), LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    yield handler.records
    LOGGER.removeHandler(handler)
    LOGGER.setLevel(level)


def test_every_event_type_has_an_example_and_prints_the_lines_the_cli_printed():
    cases = examples()
    assert {type(e) for e in cases} == set(ev.EVENTS)
    assert len(set(ev.EVENTS)) == len(ev.EVENTS) and all(issubclass(t, ev.Event) for t in ev.EVENTS)
    assert [e.line for e in cases] == GOLDEN
    stream = io.StringIO()
    printer = ProgressPrinter(stream)
    for event in cases:
        printer(event)
    assert stream.getvalue().splitlines() == [g for g in GOLDEN if g is not None]


def test_the_words_are_dispatched_by_type_not_by_name():
    @dataclasses.dataclass(frozen=True)
    class Counted(ev.TrialDone):      # a subclass gets its base's words
        kind = "counted"

    @dataclasses.dataclass(frozen=True)
    class Unknown(ev.Event):          # a type with no words says nothing, whatever its kind
        kind = "trial"

    assert Counted(1, 6, TRIAL, TRIAL, 3.0).line == ev.TrialDone(1, 6, TRIAL, TRIAL, 3.0).line
    assert Unknown().line is None and line(Unknown()) is None
    line.register(Unknown, lambda e: "an unknown event")
    assert Unknown().line == "an unknown event"
    assert ev.TuneDone(RESULT).line is None, "the CLI prints the table instead"


def test_events_are_frozen_and_every_one_pickles_with_its_records():
    for event in examples():
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, dataclasses.fields(event)[0].name, None)
        back = pickle.loads(pickle.dumps(event))
        assert type(back) is type(event) and back == event and back.line == event.line


def test_a_two_argument_callback_still_gets_the_old_pair_with_a_deprecation_warning():
    got = []

    def entry(progress):   # stands for tune(): the warning points at the line that called it
        return api_progress(progress)

    with pytest.warns(DeprecationWarning, match="two arguments .* deprecated.*one argument") as caught:
        progress = entry(lambda event, data: got.append((event, data)))
    assert caught[0].filename == __file__
    for event in examples():
        progress(event)
    kinds = [k for k, _ in got]
    assert kinds == [e.kind for e in examples()]
    trial = next(d for k, d in got if k == "trial")
    assert set(trial) == {"n", "expected", "result", "best", "elapsed", "again", "cpus", "busy"}
    assert trial["result"] is TRIAL and trial["n"] == 1
    waits = [d for k, d in got if k == "waiting"]
    assert [d["what"] for d in waits] == ["lock", "lock", "trial_start", "rank"] and waits[0]["holder"] == 4242
    final = next(d for k, d in got if k == "final")
    assert final["rates"] == {"16-3": [1200.0], "16-1": []}
    assert next(d for k, d in got if k == "recheck")["configs"] == ["16-3", "16-1"]
    assert next(d for k, d in got if k == "done")["result"] is RESULT


def test_one_argument_callables_of_every_shape_get_the_event_and_no_warning():
    class Bar:
        def __init__(self):
            self.seen = []

        def __call__(self, event):
            self.seen.append(event)

    seen = []
    bar = Bar()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for callback in (seen.append, bar, lambda event, extra=None: seen.append(event),
                         lambda *args: seen.extend(args), ProgressPrinter(io.StringIO())):
            assert ev.subscriber(callback) is callback
    for bad in (lambda: None, lambda a, b, c: None, "print"):
        with pytest.raises(UsageError, match="progress must"):
            ev.subscriber(bad)
    assert ev.subscriber(None) is None and api_progress(False) is None


def test_api_progress_goes_to_the_callback_and_to_the_log_with_the_event_attached(logged):
    seen = []
    progress = api_progress(seen.append)
    cases = examples()
    for event in cases:
        progress(event)
    assert seen == cases
    assert [r.event for r in logged] == cases, "every event is logged, the record carrying it"
    for record, event in zip(logged, cases):
        if event.line is None:
            assert record.levelno == logging.DEBUG and record.getMessage() == f"autoloader: {event.kind}"
        else:
            assert record.levelno == logging.INFO and record.getMessage() == event.line
    assert all(r.name == "autoloader" for r in logged)
    logged.clear()
    default = api_progress(None)   # the default: the log alone
    default(cases[0])
    assert [r.event for r in logged] == [cases[0]]


@pytest.mark.slow
def test_a_real_tune_hands_a_callback_typed_events_and_logs_each_of_them(out_dir, logged):
    from fleet_workloads import Paced

    from autoloader import best_loader, tune

    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = tune(Paced(cost_s=0.002), batch_size=16, budget=20, device="cpu", out=out_dir, progress=seen.append)
    assert all(isinstance(e, ev.Event) for e in seen)
    kinds = [e.kind for e in seen if not isinstance(e, ev.Waiting)]
    assert kinds[:2] == ["start", "profile"] and kinds[-2:] == ["done", "applied"] and "trial" in kinds, kinds
    assert set(kinds) <= {"start", "profile", "trial", "final", "recheck", "unstored", "done", "applied"}, kinds
    assert seen[-2].result is result
    closing = seen[-1]   # NOTE [ The closing line ] in api.py
    assert closing.tuned == result.tuned and not closing.reused and closing.path == result.path and closing.to is None
    assert closing.line.startswith(f"autoloader: picked batch_size=16, num_workers={result.config.num_workers}")
    provisional = "; provisional" if result.tuned.provisional else ""   # NOTE [ A provisional pick ]
    assert closing.line.endswith(f"(tuned now{provisional}, {rate(result.samples_per_s)}; result {result.path})")
    trials = [e for e in seen if isinstance(e, ev.TrialDone)]
    assert [e.n for e in trials] == list(range(1, len(trials) + 1))
    assert [e.result.config for e in trials] == [t.config for t in result.trials]
    start = next(e for e in seen if isinstance(e, ev.TuneStarted))
    assert start.key == result.tuned.dataset_key and start.budget == 20
    assert [r.event for r in logged] == seen, "the log got the same events, in order"
    assert [r.getMessage() for r in logged if r.levelno == logging.INFO] == [e.line for e in seen if e.line]
    logged.clear()
    again = []
    best_loader(Paced(cost_s=0.002), batch_size=16, budget=10, device="cpu", out=out_dir, progress=again.append)
    assert [type(e) for e in again] == [ev.ResultReused, ev.SettingsApplied]
    # A provisional pick is handed out only where it was measured ahead of the rule (NOTE [ A
    # provisional pick ]): the reuse hands out what stored_result() says, the tune's pick otherwise.
    from autoloader import stored_result
    handed = stored_result(Paced(cost_s=0.002), batch_size=16, device="cpu", out=out_dir)
    assert again[0].tuned.config == handed.config
    assert handed.config == result.tuned.config or result.tuned.provisional
    assert again[0].line.startswith(f"autoloader: using the stored result {again[0].path}")
    assert again[1].reused and again[1].path == result.path and again[1].to == "the DataLoader returned"
    assert f" to the DataLoader returned (reused{provisional}, " in again[1].line
    closing = [r for r in logged if r.event is again[1]]
    assert len(closing) == 1 and closing[0].levelno == logging.INFO and closing[0].name == "autoloader"


def test_one_rate_formatter_keeps_three_significant_figures_under_100_per_s():
    """events/lines.rate is every printed rate's (the table, the verdict, the report, the fleet):
    a slow step's 5.3/s and 7.1/s are told apart, not both printed 5/s and 7/s."""
    from autoloader.explain import evidence
    from autoloader.fleet import retune

    assert [rate(r) for r in (5.3, 7.14, 0.4231, 42.66, 99.94, 100.4, 1234.5, 0.0)] == [
        "5.3/s", "7.14/s", "0.423/s", "42.7/s", "99.9/s", "100/s", "1,234/s", "0/s"]
    assert rate(None) == "-" and rate(float("inf")) == "unbounded" and rate(5.3, " samples/s") == "5.3 samples/s"
    assert evidence.rate is rate and retune.rate is rate


def test_every_event_the_readme_lists_is_importable_from_autoloader_and_every_event_is_listed():
    """The README's "Progress events" section names the events importable from ``autoloader``:
    each of them is in ``autoloader.__all__`` and imports from there, and every event type
    (``EVENTS``) is both listed there and exported."""
    import os
    import re

    import autoloader

    readme = open(os.path.join(os.path.dirname(__file__), os.pardir, "README.md"), encoding="utf-8").read()
    section = readme.split("### Progress events", 1)[1].split("\n#", 1)[0].split("```", 1)[0]
    kinds = {kind.__name__ for kind in ev.EVENTS}
    listed = set(re.findall(r"`([A-Z][A-Za-z]+)`", section)) & (kinds | {"Event"})
    assert listed == kinds, (sorted(kinds - listed), sorted(listed - kinds))
    assert kinds <= set(autoloader.__all__), sorted(kinds - set(autoloader.__all__))
    for name in sorted(listed):
        assert getattr(autoloader, name) is getattr(ev, name), name
        exec(f"from autoloader import {name}", {})
