#!/usr/bin/env bash
# The session's GPU run: started in the background by the first device call, polled by the next
# (each poll copies /tmp/b as one archive to $OUT). SHA: the commit measured.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p /tmp/b
{
  date -u +"%FT%TZ start ${SHA:-unknown}"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
  echo "== start methods (Python-object rows, 8 workers)"; date -u +%T
  timeout 300 python3 -m scripts.bench.start_methods --workers 8 --seconds 20 --out /tmp/b/start_methods.json > /tmp/b/start_methods.log 2>&1
  echo "rc $?"; date -u +%T
  echo "== what-ifs made by hand"
  timeout 420 python3 -m scripts.bench whatif --items hugefloat:uint8,hugefloat:pin_off,heavytail:in_order --rounds 5 --out /tmp/b/whatif > /tmp/b/whatif.log 2>&1
  echo "rc $?"; date -u +%T
  echo "== bench run at the default budget (lean grid)"
  python3 -m scripts.bench run --grid lean --workloads hugefloat,heavytail,large,small,gpubound --deadline-seconds 660 --out /tmp/b/run > /tmp/b/run.log 2>&1
  echo "rc $?"; date -u +%T
  touch /tmp/b/DONE
} > /tmp/b/driver.log 2>&1
