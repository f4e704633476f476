"""A node leaving the cluster drops the metadata service's entries and stops the daemon
(ganeti/backend/node.py; doc/images.md, "The metadata service")."""

from __future__ import annotations

import os
import subprocess
import sys

from ganeti import constants
from ganeti.backend import node


def test_leaving_removes_the_entries_and_stops_ganeti_metad(ctx) -> None:
    os.makedirs(ctx.paths.metadata_dir)
    with open(ctx.paths.metadata_entry("web1"), "w", encoding="utf-8") as fh:
        fh.write("{}")
    # a stand-in for the daemon: a process of ours named by the pid file
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(ctx.paths.pid_file(constants.METAD), "w", encoding="ascii") as fh:
            fh.write(f"{proc.pid}\n")
        node.node_leave_cluster(ctx, False)
        assert proc.wait(timeout=20) == -15          # SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert os.listdir(ctx.paths.metadata_dir) == []
