"""tools/harness/procscan.py: processes found by their /proc command line or environment."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tools.harness import procscan


def test_finds_a_child_by_its_environment_and_its_command_line_not_itself() -> None:
    mark = f"PROCSCAN_MARK={uuid.uuid4().hex}".encode()
    arg = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", arg],
                             env={**os.environ, mark.decode().split("=")[0]:
                                  mark.decode().split("=")[1]})
    try:
        by_env = procscan.pids_whose("environ", lambda env: mark in env.split(b"\0"))
        by_cmd = procscan.pids_whose("cmdline", lambda cmd: arg.encode() in cmd)
        assert by_env == [child.pid] and by_cmd == [child.pid]
        assert procscan.pids_whose("cmdline", lambda cmd: True).count(os.getpid()) == 0
    finally:
        child.kill()
        child.wait(10)
    assert procscan.pids_whose("cmdline", lambda cmd: arg.encode() in cmd) == []
