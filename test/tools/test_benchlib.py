"""tools/bench/benchlib.py: a process's CPU time from /proc."""

from __future__ import annotations

import subprocess
import sys

from tools.bench import benchlib

# spins until it used 0.3 s of CPU, mostly in user space (the clock is read
# only after each sum of 100,000 numbers: reading it is a system call), says so,
# then sleeps
_BURN = ("import time\n"
         "while time.process_time() < 0.3:\n"
         "    sum(range(100000))\n"
         "print('done', flush=True)\n"
         "time.sleep(60)\n")


def test_process_times_split_what_process_cpu_adds_up():
    proc = subprocess.Popen([sys.executable, "-c", _BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        user, system = benchlib.process_times(proc.pid)
        total = benchlib.process_cpu(proc.pid)
        assert user >= 0.2 and system >= 0.0
        assert abs(user + system - total) < 1e-9
    finally:
        proc.kill()
        proc.wait()
