"""gnt-job / gnt-debug as subprocesses against a real ganeti-masterd."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "test" / "integration" / "masterd_harness.py"
MASTERD = REPO / "daemons" / "ganeti-masterd"

pytestmark = pytest.mark.timeout(240)

if not HARNESS.exists() or not MASTERD.exists():  # pragma: no cover
    pytest.skip(f"needs {HARNESS.relative_to(REPO)} and {MASTERD.relative_to(REPO)}",
                allow_module_level=True)

from masterd_harness import NODE_NAME, start_masterd  # noqa: E402


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    handle = start_masterd(tmp_path_factory.mktemp("cli"), workers=4)
    try:
        yield handle
    finally:
        handle.kill()


def gnt(master: Any, tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run scripts/gnt-<tool> from the source tree against ``master``."""
    return subprocess.run([sys.executable, str(REPO / "scripts" / f"gnt-{tool}"), *args],
                          env=master.env, capture_output=True, text=True, timeout=timeout)


def job_count(master: Any) -> int:
    return len(master.call("QueryJobs", [None, ["id"]]))


def submit_id(proc: subprocess.CompletedProcess[str]) -> int:
    assert proc.returncode == 0, proc.stderr
    match = re.fullmatch(r"JobID: (\d+)\n", proc.stderr)
    assert match, proc.stderr
    return int(match.group(1))


def wait_status(master: Any, job_id: int, wanted: set[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = master.call("QueryJobs", [[job_id], ["status"]])[0][0]
        if status in wanted:
            return status
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {wanted}")


# "<time.ctime()> <message>": ctime pads days 1-9 with a space ("Tue Dec  1 ...").
CTIME_LINE = re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} (.*)")


def log_text(line: str) -> str:
    """The message of a ``<ctime> <message>`` log line (fails on any other line)."""
    match = CTIME_LINE.fullmatch(line)
    assert match, f"not a ctime-prefixed log line: {line!r}"
    return match.group(1)


def write_ops(tmp_path: Path, name: str, ops: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(ops))
    return str(path)


def test_delay_end_to_end_with_log_lines(master: Any) -> None:
    proc = gnt(master, "debug", "delay", "--repeat", "2", "0.05")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    for i, line in enumerate(lines, 1):
        # "Mon Nov 29 22:42:39 2026 Test delay iteration 1/2"
        assert log_text(line) == f"Test delay iteration {i}/2"
    listing = gnt(master, "job", "list", "--no-headers")
    assert re.search(r"^\s*\d+ success TEST_DELAY\(0\.05\)$", listing.stdout, re.M), listing.stdout


def test_submit_prints_job_id_and_wait(master: Any) -> None:
    job_id = submit_id(gnt(master, "debug", "delay", "--submit", "0.1"))
    wait = gnt(master, "job", "wait", str(job_id))
    assert (wait.returncode, wait.stdout) == (0, "")
    info = gnt(master, "job", "info", str(job_id))
    assert info.returncode == 0
    assert f"Job ID: {job_id}" in info.stdout and "Status: success" in info.stdout
    assert "- Opcode: OP_TEST_DELAY" in info.stdout and "duration: 0.1" in info.stdout
    listing = gnt(master, "job", "list", "--separator=:", "--no-headers", "-o", "id,status",
                  str(job_id))
    assert listing.stdout == f"{job_id}:success\n"


def test_submit_file_watch_and_failure_exit_codes(master: Any, tmp_path: Path) -> None:
    path = write_ops(tmp_path, "ops.json", [
        {"OP_ID": "OP_TEST_JQUEUE", "log_messages": ["hello", "world"]}])
    proc = gnt(master, "job", "submit", path)
    assert proc.returncode == 0, proc.stderr
    assert [log_text(line) for line in proc.stdout.splitlines()] == ["hello", "world"]
    job_id = submit_id(gnt(master, "job", "submit", "--submit", path))
    watch = gnt(master, "job", "watch", str(job_id))
    assert watch.returncode == 0
    assert watch.stdout.startswith(f"Output from job {job_id} follows\n")
    assert watch.stdout.rstrip().endswith("world")
    failing = write_ops(tmp_path, "fail.json", [{"OP_ID": "OP_TEST_JQUEUE", "fail": True}])
    proc = gnt(master, "job", "submit", failing)
    assert proc.returncode == 1
    assert "Failure: command execution error:\nOpcode failure was requested" in proc.stderr
    job_id = submit_id(gnt(master, "job", "submit", "--submit", failing))
    wait = gnt(master, "job", "wait", str(job_id))
    assert wait.returncode == 1 and "Opcode failure was requested" in wait.stderr


def test_cancel_and_change_priority_of_waiting_job(master: Any, tmp_path: Path) -> None:
    blocker = submit_id(gnt(master, "debug", "delay", "--submit", "3"))
    path = write_ops(tmp_path, "dep.json", [
        {"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[blocker, []]]}])
    waiter = submit_id(gnt(master, "job", "submit", "--submit", path))
    wait_status(master, waiter, {"waiting"})
    proc = gnt(master, "job", "change-priority", "--priority", "high", str(waiter))
    assert proc.returncode == 0, proc.stderr
    assert master.call("QueryJobs", [[waiter], ["priority"]])[0][0] == -10
    proc = gnt(master, "job", "cancel", str(waiter))
    assert proc.returncode == 0, proc.stderr
    assert wait_status(master, waiter, {"canceled"}) == "canceled"
    # A finished job cannot be canceled: exit 1 with the master's message.
    proc = gnt(master, "job", "cancel", str(waiter))
    assert proc.returncode == 1 and proc.stderr.strip()
    wait = gnt(master, "job", "wait", str(waiter))
    assert wait.returncode == 1 and "canceled" in wait.stderr
    wait_status(master, blocker, {"success"})


def test_archive_and_autoarchive(master: Any) -> None:
    job_id = submit_id(gnt(master, "debug", "delay", "--submit", "0"))
    wait_status(master, job_id, {"success"})
    proc = gnt(master, "job", "archive", str(job_id))
    assert proc.returncode == 0, proc.stderr
    listing = gnt(master, "job", "list", "--no-headers", "-o", "id")
    assert str(job_id) not in listing.stdout.split()
    assert gnt(master, "job", "archive", "999999").returncode == 1
    gnt(master, "debug", "delay", "0")
    proc = gnt(master, "job", "autoarchive", "all")
    assert proc.returncode == 0, proc.stderr
    match = re.fullmatch(r"Archived (\d+) jobs, (\d+) unchecked left\n", proc.stdout)
    assert match and int(match.group(1)) >= 1, proc.stdout
    assert gnt(master, "job", "autoarchive", "soon").returncode == 1


def test_locks_while_delay_holds_node_lock(master: Any) -> None:
    job_id = submit_id(gnt(master, "debug", "delay", "--submit", "-n", NODE_NAME, "2"))
    wait_status(master, job_id, {"running"})
    seen = ""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        proc = gnt(master, "debug", "locks", "--no-headers", "--separator=|")
        assert proc.returncode == 0, proc.stderr
        held = [line for line in proc.stdout.splitlines()
                if line.startswith("node/") and str(job_id) in line.split("|")[2]]
        if held:
            seen = held[0]
            break
        time.sleep(0.05)
    assert seen, "no node lock owned by the delay job was shown"
    assert seen.split("|")[1] == "exclusive"
    proc = gnt(master, "debug", "locks", "-o", "name,owner")
    assert proc.stdout.splitlines()[0].split() == ["Name", "Owner"]
    wait_status(master, job_id, {"success", "error"})


def test_bad_input_gives_clear_error_and_no_job(master: Any, tmp_path: Path) -> None:
    before = job_count(master)
    bogus = write_ops(tmp_path, "bogus.json", [{"OP_ID": "OP_NO_SUCH_THING"}])
    proc = gnt(master, "job", "submit", bogus)
    assert proc.returncode == 1
    assert "OP_NO_SUCH_THING" in proc.stderr and "wrong_input" in proc.stderr
    proc = gnt(master, "debug", "delay", "--", "-1")
    assert proc.returncode == 1
    assert "prerequisites not met" in proc.stderr and "duration" in proc.stderr
    proc = gnt(master, "debug", "submit-job", bogus)
    assert proc.returncode == 1 and "OP_NO_SUCH_THING" in proc.stderr
    assert job_count(master) == before


def test_no_master_gives_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "GANETI_ROOTDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gnt-job"), "list"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Cannot communicate with the master daemon" in proc.stderr
