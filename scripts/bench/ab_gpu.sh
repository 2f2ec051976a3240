#!/usr/bin/env bash
# A change's effect on the tune's wall time, in one device call: `autoloader tune` from this
# checkout and from a copy with the change undone, each workload back to back in alternating
# order (python -m scripts.bench.ab_tunes: its docstring). The copy is this checkout's autoloader/
# and scripts/ with UNDO applied: a sed expression, run on UNDO_FILE (a path in the repository).
#
#   device run (carry .whl):
#     UNDO='s/^FINAL_MIN_ROUNDS = 2/FINAL_MIN_ROUNDS = 3/' \
#     UNDO_FILE=autoloader/search/policy.py OUT=$OUT/ab bash scripts/bench/ab_gpu.sh --pairs 1
#
# Files in $OUT: ab_tunes.md, ab_tunes.jsonl, undo.diff (what the base copy changed), bytecode.txt.
set -u
: "${UNDO:?UNDO: the sed expression that undoes the change}" "${UNDO_FILE:?UNDO_FILE: the file it edits}"
. "$(dirname "$0")/gpu_setup.sh"
out=${OUT:-/tmp/ab}
mkdir -p "$out"
base=/tmp/ab-base
rm -rf "$base" && mkdir -p "$base" && cp -r autoloader scripts pyproject.toml "$base"/
sed -i "$UNDO" "$base/$UNDO_FILE"
diff -u "$UNDO_FILE" "$base/$UNDO_FILE" > "$out/undo.diff"
[ -s "$out/undo.diff" ] || { echo "UNDO changed nothing in $UNDO_FILE: the base would be this checkout"; exit 2; }
python3 -m compileall -q -j 0 "$base/autoloader" "$base/scripts" >/dev/null 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
set -o pipefail
timeout "${AB_TIMEOUT:-480}" python3 -m scripts.bench.ab_tunes --base "$base" --out "$out" "$@" 2>&1 | tee "$out/ab.log"
