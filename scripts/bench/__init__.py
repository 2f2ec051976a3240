"""The benchmark of autoloader's tuner against a measured grid, per shared/BENCHMARK.md.

One entry, from the repository's root (``python -m scripts.bench --help``):

    python -m scripts.bench run --workloads jpeg,small --out OUT        # measure (the GPU machine)
    python -m scripts.bench run --workloads small --quick --scale 0.02 --out /tmp/b   # CPU smoke test
    python -m scripts.bench rebuild OUT --out OUT2          # summary of a killed run from its records
    python -m scripts.bench merge PART1 PART2 --out RUN     # one summary of runs made in parts
    python -m scripts.bench agreement RUN/part*/records.jsonl   # how a run's phases agree
    python -m scripts.bench replay RUN/run/records.jsonl    # the model now against what a run measured
    python -m scripts.bench node --nproc-per-node 2 --workloads jpeg --out OUT   # a node of 2 ranks

Modules: ``run`` (the run command: options, the loop over workloads), ``harness`` (one workload's
tuner, grid, final and ceiling), ``tuner_run`` (``autoloader tune`` as a subprocess), ``stability``
(three tunes and the verdict), ``plan`` (time estimates), ``figures`` (a workload's numbers from
what it measured), ``report`` (summary.md), ``records`` (records.jsonl), ``parts`` (merge and
rebuild), ``ceiling`` (the spawned ceiling child), ``workloads`` (the datasets and steps),
``agreement`` and ``replay`` (tools over records), ``node`` (the node bench: N ranks tuned and
measured together), ``common`` (names and number formats). The rules it measures by (the rule it
compares against, the sweep's base config, the tie, the time a measurement takes) are the tuner's
own, imported from ``autoloader``, so the bench and the tuner cannot drift apart.

On the lent GPU machine a run outlives one device call: start it in the background in a process
session of its own, writing under a folder, and poll that folder from the next calls (each a
few seconds after the last, before the machine is given back idle). Optuna travels as wheels
(``.whl``, carried; the machine has no registry). Start, then poll until the summary's title no
longer says "in progress"::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1; mkdir -p /tmp/b
    setsid nohup python3 -m scripts.bench run --grid lean --stability gpubound --deadline-seconds 1500 \
        --out /tmp/b/run > /tmp/b/log.txt 2>&1 < /dev/null &
    f=/tmp/b/run/summary.md
    for i in $(seq 56); do sleep 10; [ -e $f ] && ! head -1 $f | grep -q 'in progress' && break; done
    tail -n 20 /tmp/b/log.txt; tar czf $OUT/run.tgz -C /tmp/b .

The plan's estimate for every workload is in the log's first lines and in summary.md; what the
deadline leaves out is listed as not run, for another session and ``merge``.

This package's ``__init__`` imports nothing: trial processes import ``scripts.bench.workloads``
through spec strings, and must not pay for the harness.
"""
