"""Find the processes of a virtual cluster by what ``/proc`` says of them.

``destroy`` of both kinds of virtual cluster (tools/harness/vcluster.py,
tools/harness/guestcluster.py) looks for stragglers this way: a host
cluster's daemons by the ``GANETI_ROOTDIR`` in their environment, a guest
cluster's qemu and virtiofsd by the cluster directory on their command line.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["pids_whose"]


def pids_whose(proc_file: str, match: Callable[[bytes], bool]) -> list[int]:
    """Pids (this process left out) whose ``/proc/<pid>/<proc_file>`` (``cmdline``,
    ``environ``...) satisfies ``match``; processes gone or unreadable are skipped."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/{proc_file}", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if match(data):
            found.append(int(entry))
    return found
