"""Tests for ganeti.utils.process.run_command."""

from __future__ import annotations

import os
import time

import pytest

from ganeti import errors
from ganeti.utils import process


def test_output_and_exit_code_are_captured() -> None:
    result = process.run_command(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert result.stdout == "out\n" and result.stderr == "err\n"
    assert result.exit_code == 3 and result.failed and not result.timed_out
    assert "status 3" in result.fail_reason


def test_success_and_input() -> None:
    result = process.run_command(["cat"], input_data="hello")
    assert not result.failed and result.stdout == "hello"


@pytest.mark.timeout(20)   # hangs ~30 s (and fails) if the group is not killed
def test_timeout_kills_the_whole_process_group() -> None:
    result = process.run_command(["sh", "-c", "sleep 30 & echo $!; wait"], timeout=0.5)
    assert result.timed_out and result.failed
    child = int(result.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # a killed child may linger as a zombie of init for a moment
        try:
            with open(f"/proc/{child}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"background child {child} survived the timeout")


def test_missing_program_is_a_command_error() -> None:
    with pytest.raises(errors.CommandError):
        process.run_command(["/nonexistent/program-xyz"])
