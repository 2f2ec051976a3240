"""``python scripts/report_trials.py N LABEL``: how long ``write_report`` takes on a result of N
trials (``tests/explain_cases.synthetic_result``, its trials repeated), one line. Run it under
two versions of the code in turn (PYTHONPATH) to compare them in one round."""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from explain_cases import synthetic_result  # noqa: E402

from autoloader.explain.page import write_report  # noqa: E402
from autoloader.store.result import TuneResult  # noqa: E402


def main() -> None:
    n, label = int(sys.argv[1]), sys.argv[2]
    path = os.path.join(tempfile.mkdtemp(), "box", "k.json")
    os.makedirs(os.path.dirname(path))
    data = synthetic_result(path)
    trials = data["trials"]
    data["trials"] = [trials[i % len(trials)] for i in range(n)]
    result = TuneResult.from_dict(data, path)
    t0 = time.monotonic()
    written = write_report(path, result)
    print(f"{label} n={n} write_report {time.monotonic() - t0:.1f} s complete={written.complete}", flush=True)


if __name__ == "__main__":
    main()
