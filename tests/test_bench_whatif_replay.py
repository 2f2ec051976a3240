"""scripts/bench/whatif_replay.py on the records of run-20261202: the measured what-ifs predicted
again from their recorded tuner results (a replay), each uint8 side's batch split by the bursts."""

import os

import pytest

from scripts.bench import whatif_replay
from scripts.bench.records import read_records

RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "benchmarks", "run-20261202")


def test_the_recorded_uint8_what_ifs_replay_beside_their_measurement():
    rows = whatif_replay.replays(read_records([os.path.join(RUN, "whatif", "records.jsonl"),
                                               os.path.join(RUN, "whatif-f79ab31", "records.jsonl")]))
    uint8 = [r for r in rows if r.whatif == "uint8"]
    assert len(uint8) == 2 and all(r.rounds == 5 and r.measured_interval for r in uint8)
    first, second = uint8
    assert first.gain_then == pytest.approx(2.952, abs=0.01) and first.measured == pytest.approx(1.858, abs=0.01)
    assert not first.timed   # recorded before the profile timed the change: the bytes' share stands in
    # f79ab31: the final measured workers at half the pick, so the replay keeps the pick's count.
    assert second.config_then.startswith("w10") and second.config_now == "w0 pin1"
    # The bench's split of b1db5fe's sides: the loop's next() shrank under 3x where the bytes say 4x.
    as_is, changed = first.sides
    assert as_is.next_s / changed.next_s == pytest.approx(2.97, abs=0.05)
    assert as_is.model_next_s / changed.model_next_s == pytest.approx(3.97, abs=0.05)
    text = whatif_replay.report(rows)
    assert "A replay" in text and "| 20261202T155920 | hugefloat | uint8 | +300% (w10 pf2 pin1 pw1) |" in text
