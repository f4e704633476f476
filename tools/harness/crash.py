"""A node of a virtual cluster dies as a machine would: its daemons killed with SIGKILL."""

from __future__ import annotations

import os
import signal

from ganeti import constants, daemonctl
from ganeti.pathutils import Paths

__all__ = ["kill_node_daemons", "NODE_DAEMONS"]

#: the daemons a node of the virtual cluster may run
NODE_DAEMONS = (constants.MASTERD, constants.NODED, constants.RAPI)


def kill_node_daemons(paths: Paths) -> None:
    """SIGKILL every daemon of the node whose paths are ``paths`` (no shutdown of any kind:
    no lease given back, no socket closed cleanly)."""
    for daemon in NODE_DAEMONS:
        pid = daemonctl.daemon_pid(paths, daemon)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
