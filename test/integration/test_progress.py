"""Live progress on a 2-node virtual cluster (fake hypervisor): doc/progress.md.

A throttled fake migration (hvparam ``migration_bandwidth``) shows as a
``migration`` runtime job in ``gnt-instance info``, the ``hv_jobs`` field
and RAPI instance info while it runs, and is gone afterwards; the job log
has typed progress entries and exactly one final entry, also when the
migration fails; ``gnt-job watch`` prints plain lines into a pipe and
redraws a bar with ``\\r`` on a terminal.  Moves and exports write their
disk copies' entries too.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from typing import Any

import pytest
import yaml
from instance_helpers import NOCHECK, fake_hv, rows
from vcluster_harness import VirtualCluster

import rapi_helpers

from ganeti import constants, progress
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "mig1.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcp"), nodes=2, use_ssh=False) as cluster:
        rapi_helpers.add_writer(cluster)
        # 128 MiB at 8 MiB/s: a 16 s migration, long enough to be looked at
        cluster.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N1,
                   "-B", "maxmem=128M,minmem=128M", "-H", "migration_bandwidth=8", *NOCHECK,
                   INST)
        yield cluster


_rapi = rapi_helpers.call
_rapi_job = rapi_helpers.wait_job


def _submit(vc, *argv: str) -> int:
    res = vc.run(argv[0], argv[1], "--submit", *argv[2:])
    assert res.returncode == 0, res.stdout + res.stderr
    return int(res.stderr.strip().rsplit(":", 1)[1])


def _hv_jobs(vc, name: str = INST) -> str:
    (row,) = rows(vc, "name,hv_jobs", name)
    return row[1]


def _wait_running_migration(vc, tries: int = 150) -> str:
    for _ in range(tries):
        cell = _hv_jobs(vc)
        if "jobType=migration" in cell:
            return cell
        time.sleep(0.1)
    raise AssertionError("the migration never showed in hv_jobs")


def _progress(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry[3] for entry in job["oplog"][0] if entry[2] == constants.ELOG_PROGRESS]


def test_a_throttled_migration_shows_while_it_runs_and_is_gone_after(vc):
    assert "Running jobs" not in vc.ok("gnt-instance", "info", INST)
    job_id = _submit(vc, "gnt-instance", "migrate", "-f", "-n", N2, INST)
    cell = _wait_running_migration(vc)
    assert "bandwidth=8" in cell
    info = vc.ok("gnt-instance", "info", INST)
    (running,) = yaml.safe_load(info)[0]["Running jobs"]
    assert running.startswith("migration: ") and "limit 8 MiB/s" in running, info
    rapi_info = _rapi_job(vc, _rapi(vc, "GET", f"/2/instances/{INST}/info"))
    assert rapi_info["status"] == "success"
    jobs = rapi_info["opresult"][0][INST]["jobs"]
    assert [j["info"]["jobType"] for j in jobs] == ["migration"]
    assert jobs[0]["info"]["end"] == 128 << 20 and jobs[0]["info"]["rate"] == 8 << 20
    # gnt-job watch into a pipe: plain lines, no carriage returns
    watch = vc.run("gnt-job", "watch", str(job_id), timeout=120)
    assert watch.returncode == 0, watch.stdout + watch.stderr
    assert "\r" not in watch.stdout
    lines = [line for line in watch.stdout.splitlines() if " migration: " in line]
    assert lines and "migration: done, 128.0 MiB" in lines[-1], watch.stdout
    assert sum("migration: done" in line for line in lines) == 1
    # gone once the job ended; the job log says how it ended
    job = _rapi_job(vc, job_id)
    assert job["status"] == "success"
    entries = _progress(job)
    assert all(progress.is_entry(e) for e in entries)
    assert len(entries) >= 3 and [e["done"] for e in entries].count(True) == 1
    assert entries[-1]["done"] and entries[-1]["error"] is None
    assert entries[-1]["cur"] == entries[-1]["end"] == 128 << 20
    assert any(0 < e["cur"] < e["end"] and e["rate"] > 0 for e in entries[:-1])
    assert len(entries) <= 30      # throttled: about one a second for ~16 s
    assert _hv_jobs(vc) == ""
    assert "Running jobs" not in vc.ok("gnt-instance", "info", INST)
    assert rows(vc, "pnode", INST) == [[N2]]


def test_a_failed_migration_ends_its_log_with_the_error(vc):
    job_id = _submit(vc, "gnt-instance", "migrate", "-f", "-n", N1, INST)
    _wait_running_migration(vc)
    fake_hv(vc, N2).simulate_migration_failure(INST, "the target went away")
    job = _rapi_job(vc, job_id)
    assert job["status"] == "error"
    entries = _progress(job)
    assert [e["done"] for e in entries].count(True) == 1 and entries[-1]["done"]
    assert "the target went away" in entries[-1]["error"]
    assert 0 < entries[-1]["cur"] < entries[-1]["end"]
    assert _hv_jobs(vc) == ""
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    # gnt-job info prints the entries of the unknown-to-upstream type as text
    (info,) = yaml.safe_load(vc.ok("gnt-job", "info", str(job_id)))
    contents = [e["Content"] for e in info["Opcodes"][0]["Execution log"]]
    assert any(c[1] == "progress" and c[2].startswith("migration: failed at ") for c in contents)


def _run_in_pty(vc, argv: list[str], timeout: float = 120.0,
                columns: int = 100) -> tuple[int, str]:
    """Run ``gnt-*`` with a terminal (``columns`` wide) as stdout/stderr;
    (exit code, all output)."""
    script = os.path.join(vcluster.REPO_ROOT, "scripts", argv[0])
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, script, *argv[1:]], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=vc.env(), close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:     # EIO: the other side is closed
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, out.decode("utf-8", "replace")


def test_on_a_terminal_the_command_draws_a_bar(vc):
    code, out = _run_in_pty(vc, ["gnt-instance", "migrate", "-f", "-n", N1, INST])
    assert code == 0, out
    bars = [part for part in out.split("\r") if part.startswith("migration [")]
    assert len(bars) >= 3, out
    # one line redrawn: no newline inside, as wide as the terminal allows
    assert all("\n" not in bar and len(bar.rstrip()) == 99 and "%" in bar and "MiB/s" in bar
               for bar in bars[:-1]), bars
    assert "migration: done, 128.0 MiB" in out
    assert rows(vc, "pnode", INST) == [[N1]]


def test_move_and_export_write_their_disk_copies(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=12M", "-o", "tinyos",
          "-n", N1, *NOCHECK, "copy1.example.com")
    job_id = _submit(vc, "gnt-instance", "move", "-f", "-n", N2, "copy1.example.com")
    job = _rapi_job(vc, job_id)
    assert job["status"] == "success", job
    entries = _progress(job)
    assert {e["op"] for e in entries} == {"disk-copy"}
    assert [e["done"] for e in entries].count(True) == 1
    assert entries[-1]["cur"] == entries[-1]["end"] == 12 << 20
    job_id = _submit(vc, "gnt-backup", "export", "-n", N1, "copy1.example.com")
    job = _rapi_job(vc, job_id)
    assert job["status"] == "success", job
    entries = _progress(job)
    assert {e["op"] for e in entries} == {"export"}
    final = [e for e in entries if e["done"]]
    assert len(final) == 1 and final[0]["error"] is None and final[0]["cur"] == 12 << 20
    assert _hv_jobs(vc, "copy1.example.com") == ""
