"""When a long wait says what it waits for: the trial process's start-up (probe/driver.py) and
a node's ranks (node/wire.py) report a wait through their ``notice`` callback once it passes
FIRST_S, then every EVERY_S, as an event (autoloader/events); the words are events/lines.py's."""

from __future__ import annotations

from dataclasses import dataclass

FIRST_S = 5.0    # a healthy start-up or rank is usually done by then: past it, the user is told
EVERY_S = 15.0   # and told again this often while the wait goes on


@dataclass
class Notices:
    """Whether a wait of ``waited`` seconds is due its next notice (one per call that says so)."""

    next_s: float = FIRST_S

    def due(self, waited: float) -> bool:
        if waited < self.next_s:
            return False
        # A notice said at once (next_s=0: the trial process's start) is followed by the usual
        # one at FIRST_S, then one every EVERY_S.
        self.next_s = FIRST_S if waited < FIRST_S else waited + EVERY_S
        return True
