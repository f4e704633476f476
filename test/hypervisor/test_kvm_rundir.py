"""When a killed qemu has really exited (ganeti.hypervisor.kvm.rundir.process_exited)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ganeti.hypervisor.kvm.rundir import process_exited

# The child's main thread leaves with pthread_exit while a second thread
# still runs (and holds the open files): the leader is a zombie then.
_LEADER_GONE_FIRST = """
import ctypes, sys, threading, time
threading.Thread(target=time.sleep, args=(30,), daemon=False).start()
sys.stdout.write("ready\\n"); sys.stdout.flush()
ctypes.CDLL(None).pthread_exit(None)
"""


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return fh.read().rpartition(b")")[2].split()[0]


def test_a_running_process_has_not_exited() -> None:
    assert not process_exited(os.getpid())


def test_a_reaped_process_has_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_exited(child.pid)


def test_a_single_threaded_zombie_has_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while _state(child.pid) != b"Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(child.pid) == b"Z"
    try:
        assert process_exited(child.pid)
    finally:
        child.wait()


def test_a_zombie_leader_with_a_live_thread_has_not_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", _LEADER_GONE_FIRST], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while _state(child.pid) != b"Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(child.pid) == b"Z"          # the leader alone has gone
        assert len(os.listdir(f"/proc/{child.pid}/task")) == 2
        assert not process_exited(child.pid)      # its thread still holds the files
    finally:
        child.kill()
        child.wait()
    assert process_exited(child.pid)
