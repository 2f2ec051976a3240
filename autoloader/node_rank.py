"""A rank that ``autoloader tune --nproc-per-node N`` started: ``python -m autoloader.node_rank``.

Its own module so that node.py's commands unpickle as the classes node.py defines (run as
``-m autoloader.node`` they would be ``__main__``'s). See ``node.launched`` and ``node.rank_main``.
"""

import sys

from autoloader.node import rank_main

if __name__ == "__main__":
    sys.exit(rank_main())
