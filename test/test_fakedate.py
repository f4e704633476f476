"""The shifted wall clock of the calendar tests (test/fakes/fakedate)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes" / "fakedate"))
import ganeti_fakedate  # noqa: E402


@pytest.fixture
def zone(monkeypatch):
    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()
    yield set_zone
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("now, day, clock, expected", [
    ("2026-12-01 14:00:00", 1, "00:30:00", "2026-12-01 00:30:00"),    # earlier today
    ("2026-12-01 00:10:00", 1, "00:30:00", "2026-11-01 00:30:00"),    # later today: a month back
    ("2026-12-09 08:00:00", 15, "23:59:30", "2026-11-15 23:59:30"),
    ("2026-01-10 08:00:00", 15, "23:59:30", "2025-12-15 23:59:30"),   # across the year
])
def test_offset_goes_back_to_the_newest_past_day(zone, now, day, clock, expected) -> None:
    zone("Asia/Kolkata")
    real = time.mktime(time.strptime(now, "%Y-%m-%d %H:%M:%S"))
    offset = ganeti_fakedate.offset_to(day, clock, now=real)
    assert offset <= 0
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(real + offset)) == expected


def test_a_process_with_the_variable_reads_the_shifted_clock() -> None:
    here = str(Path(ganeti_fakedate.__file__).parent)
    code = ("import sys; sys.path.insert(0, %r); import ganeti_fakedate as f, time, datetime;"
            " f.from_environment(); f.install(1e9);"   # a second install changes nothing
            " print(int(time.time()), int(datetime.datetime.now().timestamp()),"
            " time.strftime('%%Y'))" % here)
    env = {**os.environ, ganeti_fakedate.ENV: str(-400 * 86400)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    shifted, via_datetime, year = int(out[0]), int(out[1]), out[2]
    real = time.time() - sum(ganeti_fakedate._installed)   # this run may be shifted itself
    assert abs(shifted - (real - 400 * 86400)) < 60
    assert abs(via_datetime - shifted) < 60
    assert year == time.strftime("%Y", time.localtime(shifted))
