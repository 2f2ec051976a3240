"""Every judgement the explanation makes, a line each on why: NOTE [ The verdict ] in verdict.py.

The verdict, the what-ifs and the ceiling read their thresholds here, so a reader sees what
"input-bound" or "worth changing" means without walking the code.
"""

from __future__ import annotations

# --- data supply: how long the step waits for its next batch ---------------------------------

# TensorFlow's input-pipeline analyzer calls a run highly input-bound when 20% or more of its
# step time waits for input, and moderately at 5%: below 5% a faster loader buys under 5%.
HIGHLY_INPUT_BOUND = 0.20
MODERATELY_INPUT_BOUND = 0.05

# Workers "fill the cores" when their CPU demand (workers x the CPU share of a sample) reaches
# this share of the CPUs the pipeline gets: past it another worker only takes time from the rest.
CORES_FULL = 0.95

# --- balance: supply and step alike -----------------------------------------------------------

# The slowest supply stage and the step within this share of each other: neither alone limits,
# and speeding one gains at most this much before the other caps it.
BALANCED_WITHIN = 0.15

# --- memory -----------------------------------------------------------------------------------

# A config kept out by a memory limit (predicted or measured past it) limits the run when the
# model predicts it this much faster than the pick: a smaller gain is within a burst's noise.
MEMORY_COSTS = 0.05
# A measured peak past this share of its limit is reported as close to it: the next batch size
# or worker up may not fit.
MEMORY_CLOSE = 0.8

# --- what-ifs ---------------------------------------------------------------------------------

# A change is offered as help when the model predicts at least this gain: under it the gain is
# within the noise of one measurement (policy.MIN_TOLERANCE) and not worth a change to code.
WORTH_CHANGING = 0.03
# The uint8 what-if's two (BYTES_MATTER, UINT8_BYTES) are search/profile.py's: the profile reads them too.
# "More CPUs" and "a faster step" are asked as doubling: a change a person can make (a larger
# instance, mixed precision), and far enough to show where the next limit is.
MORE_CPUS = 2.0
FASTER_STEP = 2.0
# Smaller batches asked about: half and a quarter of the pick's.
SMALLER_BATCHES = (0.5, 0.25)

# Supply parts whose rates are within this share of each other cap the pick together. When the
# workers fill the cores, the cores are the one to name: the main process's host work is slowed by
# the same sharing, so more CPUs lift both, while no loader setting lifts either.
PARTS_TIE = 0.05

# --- what the text mentions ------------------------------------------------------------------

# Host work slowed this much by threads outnumbering the CPUs is said (a smaller slowdown is the
# model's rounding, not something to act on).
CONTENDED = 1.05
# A receive from a busy worker this many times one from an idle worker is said, with why (NOTE [ A
# busy worker's receive ] in search/model.py): that gap, not the bytes, is then the receive's cost.
BUSY_RECEIVE = 1.5

# --- how sure ---------------------------------------------------------------------------------

# A profiled figure whose efficiency term the bursts moved by more than this factor is said to be
# corrected (the profile alone misjudged that stage).
CORRECTED = 1.25
