"""The job CLI end to end on any day of the month, in any time zone.

``ctime`` pads days 1-9 with a space (``Tue Dec  1 08:02:53 2026``); a test
that split such a line on single spaces passed on the 10th-31st only.  This
runs the CLI job tests again with every process (the tests, the master
daemon, the ``gnt-*`` commands) on a wall clock shifted back to the newest
1st of a month just after midnight in a zone east of UTC, and to the newest
15th just before midnight west of it (``test/fakes/fakedate``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
FAKEDATE = REPO / "test" / "fakes" / "fakedate" / "ganeti_fakedate.py"


def _python(*args: str, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return proc.stdout.strip()


@pytest.mark.parametrize("day, clock, zone", [
    (1, "00:30:00", "Asia/Kolkata"),
    (15, "23:59:30", "America/New_York"),
], ids=["1st-kolkata", "15th-new-york"])
def test_cli_job_tests_pass_on_a_shifted_day(day: int, clock: str, zone: str) -> None:
    env = {**os.environ, "TZ": zone}
    env.pop("GANETI_TEST_TIME_OFFSET", None)
    _python(str(FAKEDATE), "--install-hook", env=env)     # idempotent; inert without the variable
    env["GANETI_TEST_TIME_OFFSET"] = _python(str(FAKEDATE), "--offset", str(day), clock, env=env)
    # every new process of this interpreter now reads the shifted clock
    seen = _python("-c", "import time; print(time.strftime('%d %H:%M'))", env=env)
    assert seen.split()[0] == f"{day:02d}", seen
    base = tempfile.mkdtemp(prefix="cal")   # short: the daemons' UNIX socket paths live there
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--basetemp", os.path.join(base, "t"), "test/integration/test_cli_jobs.py"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=220)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
