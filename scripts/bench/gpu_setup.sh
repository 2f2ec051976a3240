# Sourced by the device scripts (quick_gpu.sh, ab_gpu.sh): the repository's root as the working
# folder, optuna's wheels from .whl installed under /tmp/site, and torch, torchvision and the
# repository compiled once where the machine writes no bytecode. OUT names the folder for
# bytecode.txt (default /tmp/quick).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."   # this file's, also when sourced from bash -c
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "the wheels in .whl did not install"; exit 2; }
  # Compiled once here, so that no tune's study open pays the first import's compile.
  python3 -m compileall -q -j 0 /tmp/site >/dev/null 2>&1
  export PYTHONPATH=/tmp/site:$PWD
fi
python3 -c "import optuna, torch" || { echo "optuna or torch cannot be imported: carry their wheels in .whl"; exit 2; }
# The GPU machine sets PYTHONDONTWRITEBYTECODE=1 and its torch has no bytecode: every fresh
# interpreter (each tune's trial process) compiled torch and torchvision again, seconds of each
# set-up (NOTE [ Imports compiled every start ] in autoloader/probe/trial.py). The bench does what
# the tune's warning tells a user: compile them once, beside their sources (an interpreter reads
# that bytecode whatever PYTHONDONTWRITEBYTECODE says). BYTECODE=0 keeps the machine as it is.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && [ "${BYTECODE:-1}" = 1 ]; then
  # Each package's folder, where it imports (a missing one is said, not fatal).
  found=$(python3 -c "import importlib
for name in ('torch', 'torchvision', 'numpy', 'PIL', 'sympy'):
    try:
        print(name, importlib.import_module(name).__path__[0])
    except Exception as exc:
        import sys; print(f'not compiled: {name} ({type(exc).__name__})', file=sys.stderr)")
  export AUTOLOADER_BENCH_COMPILED="$(echo "$found" | awk '{print $1}' | xargs)"
  mkdir -p "${OUT:-/tmp/quick}"
  imports() { python3 -c "import time; t = time.perf_counter(); import torch, torchvision
print(f'{time.perf_counter() - t:.2f}')"; }
  {
    for round in 1 2; do echo "before compiling, fresh interpreter $round: import torch, torchvision $(imports) s"; done
    echo "$found" | awk '{print $2}' | xargs -d '\n' python3 -m compileall -q -j 0 autoloader scripts >/dev/null 2>&1
    # (compileall exits non-zero where a package ships a file that is no valid Python: those few import as before)
    for round in 1 2; do echo "compiled once, fresh interpreter $round: import torch, torchvision $(imports) s"; done
  } | tee "${OUT:-/tmp/quick}/bytecode.txt"
fi
