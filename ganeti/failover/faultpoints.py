"""Named fault points for the master-role fault-injection tests.

doc/design/failover.md, "Fault injection".  A process whose environment
sets ``GANETI_FAULT_POINT`` to one of :data:`POINTS` exits at once (status
:data:`EXIT_STATUS`, no clean-up, like ``kill -9`` at that moment) when it
reaches that point; ``GANETI_FAULT_POINT=name:N`` exits the N-th time the
point is reached.  Unset (the normal case) it costs one dictionary look-up.
"""

from __future__ import annotations

import os

__all__ = ["POINTS", "EXIT_STATUS", "ENV", "reached"]

#: the environment variable that arms a point
ENV = "GANETI_FAULT_POINT"

#: the exit status of a process stopped at a fault point
EXIT_STATUS = 97

#: the named points of a takeover (gnt-cluster master-failover and the
#: master daemon's start-up), in the order a takeover reaches them
POINTS = (
    "before_vote",
    "after_stop_old_master",
    "after_config_write",
    "after_epoch_record",
    "after_config_push",
    "after_masterd_start",
)

_counts: dict[str, int] = {}


def reached(name: str) -> None:
    """Exit the process here when ``GANETI_FAULT_POINT`` names ``name``."""
    armed = os.environ.get(ENV)
    if not armed:
        return
    point, _, nth = armed.partition(":")
    if point != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= (int(nth) if nth.isdigit() else 1):
        os._exit(EXIT_STATUS)
