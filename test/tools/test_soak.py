"""tools/soak/soak.py with tiny numbers: every scenario runs and prints its figure line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.harness import procscan

# `make soak` runs the soak tool itself right after its pytest run, so this check of
# the tool is part of `make soak`, not of `make test` (its 30 s are the budget's)
pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.timeout(240)]

SOAK = Path(__file__).resolve().parents[2] / "tools" / "soak" / "soak.py"


def test_a_tiny_soak_exits_zero_and_prints_every_figure_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--cycles", "2", "--max-up", "0.3", "--idle", "20",
         "--noded-conns", "20", "--clients", "2", "--calls", "2", "--full-seconds", "1",
         "--probe-timeout", "5", "--rapi-requests", "200", "--failover-scenarios", "1",
         "--master-rounds", "0", "--rapi-memory-rounds", "1", "--rapi-memory-clients", "2",
         "--export-imports", "2", "--seed", "7"],
        capture_output=True, text=True, timeout=230, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = proc.stdout.split("== figures\n", 1)[1].splitlines()
    assert [line.split(":", 1)[0] for line in figures] == \
        ["kill9", "fulldisk", "luxi-dos", "noded-dos", "rapi", "rapi-memory", "rapi-smuggle",
         "failover", "exports", "master", "soak"]
    (kill9, fulldisk, luxi_dos, noded_dos, rapi, rapi_memory, rapi_smuggle, failover, exports,
     master, verdict) = figures
    assert re.match(r"kill9: cycles=2/2 acknowledged=\d+ lost=0 reused_ids=0 finished_changed=0 ",
                    kill9), kill9
    assert fulldisk.startswith("fulldisk: skipped (") or \
        re.search(r" shown_not_on_disk=0 changed_at_restart=0 drain_cleared=True ", fulldisk), fulldisk
    assert re.match(r"luxi-dos: attackers=20/20 .* calls=4 served=\d+ refused=\d+ .*worst_latency=",
                    luxi_dos), luxi_dos
    assert re.match(r"noded-dos: attackers=20/20 .* calls=2 served=\d+ refused=\d+ .*worst_latency=",
                    noded_dos), noded_dos
    assert re.match(r"rapi: sent=200/200 connections=\d+ rate=\d+/s bad_answers=0 .*"
                    r"alive_after=True serial_unchanged=True", rapi), rapi
    assert re.match(r"rapi-memory: rounds=1 .* big_not_refused=0 ", rapi_memory), rapi_memory
    assert re.match(r"rapi-smuggle: routes=\d+ requests=\d+ accepted=0 .*serial_unchanged=True",
                    rapi_smuggle), rapi_smuggle
    assert re.match(r"failover: scenarios=1 steps=6 .* violations=0 ", failover), failover
    assert re.match(r"exports: imports=2/2 .* silently_accepted=0 leftovers=0 leaks=0 ",
                    exports), exports
    assert re.match(r"master: rounds=0/0 .* violations=0 ", master), master
    assert verdict == "soak: ok"


def test_a_soak_stopped_with_sigterm_leaves_no_daemon_and_no_directory(tmp_path) -> None:
    marker = f"GANETI_ROOTDIR={tmp_path}".encode()

    def daemons() -> list[int]:
        return procscan.pids_whose("environ", lambda env: marker in env)

    proc = subprocess.Popen(
        [sys.executable, str(SOAK), "--only", "master", "--master-rounds", "200", "--seed", "7"],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not daemons() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert daemons(), "the soak started no virtual cluster"    # the premise
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert daemons() == []
    assert list(tmp_path.iterdir()) == []
