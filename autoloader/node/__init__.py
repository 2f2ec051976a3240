"""The ranks of one node, tuned together: one study, one result, for N ranks sharing one machine,
for ``tuning.run``, the API in every rank of a torchrun launch, and ``--nproc-per-node``:

- ``group``: this process's place in the node (``Node``, ``joined``): its rank, its CPUs, the gloo group;
- ``ranks``: ``Ranks``, one rank's share and the node's figures (one rank's the same), so the run
  never multiplies by the rank count itself;
- ``wire``: every message between ranks, each wait bounded and watched;
- ``runner``: ``NodeRunner``, rank 0's TrialRunner for the whole node, ``serve``, the others' loop,
  and the commands and replies between them;
- ``launch``: ``autoloader tune --nproc-per-node N`` starting the other ranks.

# NOTE [ Tuning a node's ranks ]
# On a node of N ranks every rank runs its own DataLoader, all sharing the node's CPUs, memory and
# /dev/shm: a config tuned for one rank alone oversubscribes the node when N use it. So the ranks
# are tuned together, each trial run by all of them at once:
# * The view. Each rank may use the node's usable CPUs (the ranks' affinities, capped by a cgroup
#   quota) // N, or its own affinity when narrower, at least 1: the ``cpus`` of the problem's
#   hardware, so the search space and the model are one rank's. The hardware's ``ranks`` enters
#   its fingerprint (``-Nrank``): single-rank and N-rank studies and results never mix. Each
#   rank's guard gets the node's --max-memory // N, and a config's predicted /dev/shm counts N
#   times: the limits hold for the node.
# * The rule is what a user applies today on every rank: ``num_workers = node CPUs - 1`` per rank
#   (stated per node, nothing divided by the ranks), clipped to the space; the final measures it,
#   and the per-rank ``rank CPUs - 1`` is one of the configs the model may pick.
# * The protocol, over a gloo group (so it works beside NCCL training): rank 0 runs the Run and its
#   NodeRunner sends each command to the other ranks (point to point, wire.py), which ``serve``
#   it: Start(setup, limits) starts every rank's TrialRunner, its trial process reading its shard
#   (DistributedSampler(num_replicas=N, rank=r), set_epoch each epoch) on its own device
#   (cuda:LOCAL_RANK, or cpu); Measure runs one burst on every rank at once (so the bursts contend
#   as training's loaders do); every rank sends its Reply back; Stop ends ``serve``. The profile is
#   rank 0's alone (one rank's pipeline costs, which the bursts by all ranks then correct). After
#   the run rank 0 broadcasts its outcome (the TuneResult, or the error), so every rank returns the
#   same. Every wait for another rank is bounded and watches that rank's process (NOTE [ Bounded
#   waits between ranks ] in wire.py); Ctrl-C ends every rank with 130.
# * The rate. Synchronous training steps at its slowest rank's pace, so a node trial's
#   ``samples_per_s`` is the slowest rank's (what the model predicts: one rank's loop, under the
#   node's contention) and ``rank_samples_per_s`` lists every rank's; the node's rate, and the
#   result's top-level figures, are N x that (N is fixed within a study). Memory figures are the
#   largest rank's (each against its --max-memory // N), /dev/shm growth the largest seen (the
#   node's), waits the longest.
# * A failure on any rank is the node trial's, with that rank's cause and the rank named; a rank
#   that cannot start is a SetupError naming it. Ranks' bursts end by their own stop rules, so the
#   last few batches of the longest one run with less contention.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["group", "launch", "ranks", "runner"]
