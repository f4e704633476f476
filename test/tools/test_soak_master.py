"""tools/soak/soak.py --only master with one round: it runs, prints its figure line, exits 0.

The plan is a failover armed at the fault point before the vote, which
changes nothing, so the round must keep every promise on any failover.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SOAK = Path(__file__).resolve().parents[2] / "tools" / "soak" / "soak.py"


def test_one_master_round_exits_zero_and_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--only", "master", "--master-rounds", "1",
         "--master-plan", "point-before_vote", "--master-first-seed", "7"],
        capture_output=True, text=True, timeout=290, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = proc.stdout.split("== figures\n", 1)[1].splitlines()
    assert re.match(r"master: rounds=1/1 first_seed=7 acks=[1-9]\d* failovers_ok=\d+/[1-9]\d*"
                    r" clusters=1 .* violations=0 lost=0 ", figures[0]), figures[0]
    assert "master: round seed=7 plan=point-before_vote" in proc.stdout
    assert figures[-1] == "soak: ok"
