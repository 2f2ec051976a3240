"""The bench's what-if and verdicts commands, on records written here (no tune, no trial)."""

from __future__ import annotations

import argparse
import json

import pytest
from explain_cases import synthetic_result

from scripts.bench import whatif


def test_items_are_workload_whatif_pairs():
    assert whatif._items("hugefloat:uint8, heavytail:in_order,hugefloat:pin_off") == {
        "hugefloat": ["uint8", "pin_off"], "heavytail": ["in_order"]}
    with pytest.raises(SystemExit, match="WORKLOAD:WHATIF"):
        whatif._items("hugefloat")


def test_verdicts_reads_each_recorded_tune_once(tmp_path, capsys):
    result = synthetic_result()
    path = tmp_path / "records.jsonl"
    rows = [{"run_id": "a", "workload": "w1", "phase": "tuner", "tuner": result},
            {"run_id": "a", "workload": "w1", "phase": "tuner", "tuner": result},   # a stability re-tune
            {"run_id": "a", "workload": "w2", "phase": "grid", "result": {}},
            {"run_id": "a", "workload": "w3", "phase": "tuner", "tuner": None}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert whatif.verdicts_main([str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| workload | verdict |") and len(table) == 3 and table[2].startswith("| w1 | ")


def test_the_summary_sets_the_prediction_beside_the_measurement():
    args = argparse.Namespace(items="hugefloat:uint8", rounds=5, budget=None, scale=None, out="/tmp/x")
    row = {"workload": "hugefloat", "whatif": "uint8", "title": "Batches in uint8", "dataset": "hugefloat8",
           "pick": "w0 pin1", "config": "w2 pf2 pin1 pw1", "predicted_gain": 2.94, "measured_gain": 1.5,
           "rounds": 5, "as_is_median": 400.0, "changed_median": 1000.0, "ratios": [2.5] * 5}
    text = whatif.render([row], [], args)
    assert "| hugefloat | Batches in uint8 | w0 pin1 | w2 pf2 pin1 pw1 (hugefloat8) | +294.0% | +150.0% | 5 |" in text
    assert "`python -m scripts.bench whatif --items hugefloat:uint8 --rounds 5 --out /tmp/x`" in text
    # A gain over another config than the pick (WhatIf.base_config) says which side was measured as is.
    other = whatif.render([{**row, "base": "w8 pf2 pin1 pw1"}], [], args)
    assert "| w0 pin1 (as is: w8 pf2 pin1 pw1) | w2 pf2 pin1 pw1 (hugefloat8) |" in other
