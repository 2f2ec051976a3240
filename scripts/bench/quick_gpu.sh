#!/usr/bin/env bash
# Issue 34's quick GPU measurement, in one device call of about 4 minutes (the machine's start
# included): the tune's wall time at its default budget on hugefloat, heavytail and large, and
# each pick against the cpus-1 rule in paired rounds (python -m scripts.bench quick: its
# docstring). Files in $OUT: summary.md, records.jsonl, quick.log (and a tuner's stderr, if any).
#
#   device run: bash scripts/bench/quick_gpu.sh            (carry .whl: optuna and its needs)
#   here, on the CPU:  OUT=/tmp/q bash scripts/bench/quick_gpu.sh --device cpu --scale 0.05
#
# DEADLINE (seconds, default 220) bounds the bench; the tunes come first, the paired rounds take
# what is left (3 to 5 a workload, the cheapest first; said in the summary when cut).
set -u
. "$(dirname "$0")/gpu_setup.sh"
out=${OUT:-/tmp/quick}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
set -o pipefail
timeout "${QUICK_TIMEOUT:-300}" python3 -m scripts.bench quick --deadline-seconds "${DEADLINE:-220}" \
  --against results/benchmarks/run-20261202/run/records.jsonl --out "$out" "$@" 2>&1 | tee "$out/quick.log"
