"""``python -m scripts.faults [--report results/reliability.md] [--trial-timeout 8]``: the fault suite."""

import sys

from scripts.faults.suite import main

if __name__ == "__main__":
    sys.exit(main())
