"""The job CLI end to end on any day of the month, in any time zone.

``ctime`` pads days 1-9 with a space (``Tue Dec  1 08:02:53 2026``); a test
that split such a line on single spaces passed on the 10th-31st only.  This
runs the CLI job tests again with every process (the test, the master
daemon, the gnt-* commands) on a faked clock: the 1st of a month in a
zone east of UTC, and the 15th late at night west of it.  libfaketime comes
from Debian's ``faketime`` package, which ``make test`` installs.
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
FAKETIME = shutil.which("faketime")


@pytest.mark.skipif(FAKETIME is None, reason="the faketime command (Debian package faketime,"
                                             " installed by `make test` as root) is missing")
@pytest.mark.parametrize("when, zone", [
    ("2027-03-01 00:30:00", "Asia/Kolkata"),
    ("2027-03-15 23:59:30", "America/New_York"),
], ids=["1st-kolkata", "15th-new-york"])
def test_cli_job_tests_pass_on_a_faked_day(when: str, zone: str) -> None:
    assert FAKETIME is not None
    env = {**os.environ, "TZ": zone}
    check = subprocess.run([FAKETIME, when, sys.executable, "-c",
                            "import time; print(time.strftime('%d %Z'))"],
                           env=env, capture_output=True, text=True, timeout=30)
    assert check.stdout.split()[0] == when[8:10], check   # the clock really is faked
    base = tempfile.mkdtemp(prefix="cal")   # short: the daemons' UNIX socket paths live there
    try:
        proc = subprocess.run(
            [FAKETIME, when, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--basetemp", os.path.join(base, "t"), "test/integration/test_cli_jobs.py"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=220)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
