#!/usr/bin/env bash
# Issue 54's GPU figures for in-run tuning, in one device call (python -m scripts.bench.inrun_gpu:
# its docstring says the phases): per workload, the first batch of best_loader in the run against
# a plain DataLoader with the rule; epoch 1 tuned in the run, with the pick from the start and
# with the rule; the pick against a small grid in paired rounds.
#
#   device run (carry .whl), one workload a call so that its epochs can last 60 s:
#     COMMIT=<sha> OUT=$OUT bash scripts/bench/inrun_gpu.sh --workloads heavytail
#     COMMIT=<sha> OUT=$OUT bash scripts/bench/inrun_gpu.sh --workloads hugefloat
#   a short call (about 290 s: the epochs in the run and with the pick, 60 s each, no rule epoch):
#     COMMIT=<sha> OUT=$OUT DEADLINE=270 INRUN_TIMEOUT=300 bash scripts/bench/inrun_gpu.sh --workloads heavytail --no-rule-epoch
#   the climb with another one-pair bound (schedule.FAR_AHEAD; the summary's "First pair" line
#   judges the first pair on its own at the bound the run used):
#     COMMIT=<sha> OUT=$OUT bash scripts/bench/inrun_gpu.sh --workloads heavytail --far-ahead 1.25
#   here, on the CPU:  OUT=/tmp/ig bash scripts/bench/inrun_gpu.sh --device cpu --tiny
#
# COMMIT names the commit in the summary (the device's copy of the tree can carry another's git
# state: pass it, never `git rev-parse` there); the summary also gives the autoloader/ source's
# digest (scripts/bench/common.py's source_digest), which a checkout of the commit reproduces.
# DEADLINE (seconds, default 480) bounds the bench; INRUN_TIMEOUT (default 540) kills it past
# that. Every phase rewrites results.json and summary.md, so a call cut short still returns
# figures. Files in $OUT: summary.md, results.json, inrun_gpu.log (and bytecode.txt, if compiled).
set -u
# No trial process starts here (the in-run tune forks DataLoader workers only): no bytecode step.
export BYTECODE=${BYTECODE:-0}
. "$(dirname "$0")/gpu_setup.sh"
export AUTOLOADER_BENCH_COMMIT=${COMMIT:-}
out=${OUT:-/tmp/ig}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
set -o pipefail
timeout "${INRUN_TIMEOUT:-540}" python3 -m scripts.bench.inrun_gpu --deadline-seconds "${DEADLINE:-480}" \
  --out "$out" "$@" 2>&1 | tee "$out/inrun_gpu.log"
