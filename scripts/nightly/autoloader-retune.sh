#!/usr/bin/env bash
# The one entry the nightly schedulers call (cron, systemd, Kubernetes, Slurm): run
# `autoloader retune` from the installed environment, one run at a time per machine, and pass its
# exit code through (0 unchanged, 3 drifted, 5 inconclusive on a busy machine, 1 a dataset failed, 2 bad registry).
#
# Settings, from the environment (the scheduler entries set them):
#   AUTOLOADER_VENV      the environment autoloader is installed in (default: the one that has
#                        `autoloader` on PATH)
#   AUTOLOADER_REGISTRY  the registry TOML (default: /etc/autoloader/registry.toml)
#   AUTOLOADER_HOME      where results live (default: the per-user cache, ~/.cache/autoloader)
#   AUTOLOADER_STORAGE   an Optuna storage URL shared by the fleet (default: the registry's, else SQLite)
#   AUTOLOADER_REPORTS   where reports go (default: the registry's, else $AUTOLOADER_HOME/retune/NAME)
#   AUTOLOADER_LOCK      the lock file that keeps runs from overlapping (default: /tmp/autoloader-retune.lock)
set -uo pipefail

registry="${AUTOLOADER_REGISTRY:-/etc/autoloader/registry.toml}"
if [ -n "${AUTOLOADER_VENV:-}" ]; then
    bin="$AUTOLOADER_VENV/bin/autoloader"
else
    bin="$(command -v autoloader || true)"
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "autoloader-retune: no autoloader found (set AUTOLOADER_VENV to the environment it is installed in)" >&2
    exit 2
fi

args=(retune "$registry")
[ -n "${AUTOLOADER_STORAGE:-}" ] && args+=(--storage "$AUTOLOADER_STORAGE")
[ -n "${AUTOLOADER_REPORTS:-}" ] && args+=(--reports "$AUTOLOADER_REPORTS")
args+=("$@")

# One run at a time: a run still going when the next is due makes the next one wait for it, and
# a second run on the same cores would only measure the two of them fighting.
lock="${AUTOLOADER_LOCK:-/tmp/autoloader-retune.lock}"
if command -v flock >/dev/null 2>&1; then
    exec flock "$lock" "$bin" "${args[@]}"
fi
exec "$bin" "${args[@]}"
