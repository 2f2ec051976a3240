"""What the user asks and the machine offers, checked once before anything runs.

Serves ``api`` (which builds a ``Problem`` and ``Options`` from every entry point's arguments),
the CLI and the retune registry. Every input check lives here, and raises a UsageError that
states the rule, the value received and the fix:

- ``problem``: the tuning problem (dataset, step, batch sizes, device, DataLoader arguments) and
  its key;
- ``source``: how the dataset and step reach a trial process (a spec to re-import, or a pickle);
- ``hardware``: the usable CPUs, memory, /dev/shm and GPUs (through NVML, never CUDA);
- ``content``: a dataset's content fingerprint, part of its key;
- ``code_digest``: a digest of the user's code, so a failure it caused does not outlive it;
- ``options``: the budget, the limits, where results go; ``limits``: the limits a user may not
  have thought of; ``home``: the results home.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["code_digest", "content", "hardware", "home", "limits", "loader_args", "options", "problem",
           "source"]
