"""A rank that ``autoloader tune --nproc-per-node N`` started: ``python -m autoloader.node``.

The commands it serves are the classes of ``node.runner``, imported from there (run as a script
they would be ``__main__``'s and would not unpickle). See ``node.launch``.
"""

import sys

from .launch import rank_main

if __name__ == "__main__":
    sys.exit(rank_main())
