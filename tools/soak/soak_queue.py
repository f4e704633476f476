"""Soak scenarios of the job queue: the kill -9 loop and the full-disk cycle.

Both run a real ganeti-masterd (``--no-rpc``, one node, temporary root;
see test/integration/masterd_harness.py) and talk to it with
:class:`ganeti.luxi.Client`.  Every loop is bounded in count and in time.
What they check is the job queue's promise in doc/protocols/jobs.md: an
acknowledged job is never lost, an id is never used twice, and a state
shown to a client is already on disk.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, luxi, serializer
from ganeti.opcodes import wire
from host_helpers import fill, mount_tmpfs, umount
from masterd_harness import MasterdHandle, prepare_root, start_masterd

__all__ = ["Kill9Figures", "FullDiskFigures", "run_kill9", "run_full_disk", "FINAL"]

#: Job and opcode statuses after which nothing changes.
FINAL = frozenset({"success", "error", "canceled"})
#: How far an opcode status has come (canceling counts as running).
_RANK = {"queued": 0, "waiting": 1, "canceling": 2, "running": 2,
         "success": 3, "error": 3, "canceled": 3}
_WAIT_FINISHED = 120.0       # seconds for the acknowledged jobs to end
_CALL_TIMEOUT = 30.0         # seconds for one LUXI call of the checker


def _delay(duration: float) -> dict[str, Any]:
    return wire.test_delay(duration=duration, no_locks=True)


def _tally(counter: Counter[str]) -> str:
    return ",".join(f"{k}:{v}" for k, v in sorted(counter.items())) or "-"


class _Submitter(threading.Thread):
    """Submits batches of short OP_TEST_DELAY jobs until stopped, killed or out of time.

    ``pause`` seconds between batches keep the queue from growing faster
    than the workers empty it.
    ``acked`` holds the ids the master acknowledged, in order; a broken
    connection (the master was killed) ends the thread.
    """

    def __init__(self, socket_path: str, rng: random.Random, *, batch: int,
                 max_duration: float, pause: float, deadline: float) -> None:
        super().__init__(daemon=True, name="soak-submitter")
        self.socket_path = socket_path
        self.rng = rng
        self.batch = batch
        self.max_duration = max_duration
        self.pause = pause
        self.deadline = deadline
        self.stop = threading.Event()
        self.acked: list[int] = []
        self.refused: Counter[str] = Counter()

    def run(self) -> None:
        with luxi.Client(self.socket_path, rw_timeout=_CALL_TIMEOUT) as client:
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                jobs = [[_delay(round(self.rng.uniform(0, self.max_duration), 3))]
                        for _ in range(self.batch)]
                try:
                    results = client.SubmitManyJobs(jobs)
                except errors.JobQueueError as exc:   # full or drained: back off
                    self.refused[type(exc).__name__] += len(jobs)
                    time.sleep(0.05)
                    continue
                except (errors.GanetiError, OSError):
                    return                            # the master is gone
                for ok, value in results:
                    if ok:
                        self.acked.append(value)
                    else:
                        self.refused["rejected"] += 1
                self.stop.wait(self.pause)


# --- the kill -9 loop ------------------------------------------------------------

@dataclass
class Kill9Figures:
    """What the kill -9 loop saw; :meth:`failed` when the queue broke a promise."""

    requested: int
    cycles: int = 0
    acknowledged: int = 0
    lost: set[int] = field(default_factory=set)
    reused: set[int] = field(default_factory=set)
    changed: set[int] = field(default_factory=set)
    refused: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    worst_restart: float = 0.0
    stopped: str = ""

    def failed(self) -> bool:
        return bool(self.lost or self.reused or self.changed or self.statuses.keys() - FINAL)

    def line(self) -> str:
        return (f"kill9: cycles={self.cycles}/{self.requested} acknowledged={self.acknowledged}"
                f" lost={len(self.lost)} reused_ids={len(self.reused)}"
                f" finished_changed={len(self.changed)} final_statuses={_tally(self.statuses)}"
                f" refused={_tally(self.refused)} worst_restart={self.worst_restart:.2f}s"
                + (f" stopped_early={self.stopped!r}" if self.stopped else ""))


def _query_status(client: luxi.Client, ids: list[int]) -> dict[int, str | None]:
    rows = client.QueryJobs(ids, ["status"]) if ids else []
    return {job_id: (row[0] if row is not None else None) for job_id, row in zip(ids, rows)}


def _known_high(client: luxi.Client) -> int:
    rows = client.QueryJobs(None, ["id"])
    return max((row[0] for row in rows if row is not None), default=0)


def _wait_finished(client: luxi.Client, ids: list[int], timeout: float) -> dict[int, str | None]:
    """Statuses of ``ids`` once all are final (or gone), or when ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = _query_status(client, ids)
        if all(s is None or s in FINAL for s in statuses.values()) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.2)


def run_kill9(workdir: str, *, cycles: int, rng: random.Random, workers: int = 8,
              batch: int = 5, max_duration: float = 0.02, pause: float = 0.05,
              max_up: float = 1.0,
              time_limit: float = 1800.0, log: Any = print) -> Kill9Figures:
    """Submit continuously, kill -9 masterd at a random moment, restart, check; ``cycles`` times.

    After each restart: every acknowledged job is known (lost otherwise),
    every job seen finished before the kill still has that status, and the
    ids acknowledged in the cycle are above every id known before it
    (reused otherwise).  Stops early (and says so) past ``time_limit``.
    """
    figures = Kill9Figures(requested=cycles)
    end = time.monotonic() + time_limit
    handle = start_masterd(workdir, workers=workers)
    acked: list[int] = []
    final: dict[int, str] = {}
    high = 0
    try:
        checker = luxi.Client(handle.socket_path, rw_timeout=_CALL_TIMEOUT)
        for cycle in range(1, cycles + 1):
            if time.monotonic() > end:
                figures.stopped = f"time limit {time_limit:g}s after {cycle - 1} cycles"
                break
            sub = _Submitter(handle.socket_path, random.Random(rng.random()), batch=batch,
                             max_duration=max_duration, pause=pause, deadline=end + 60)
            sub.start()
            time.sleep(rng.uniform(0.05, max_up))
            # what was seen finished must stay so (queried before the kill)
            for job_id, status in _query_status(checker, list(sub.acked)).items():
                if status in FINAL:
                    final[job_id] = status
            time.sleep(rng.uniform(0, 0.1))
            handle.kill()
            checker.close()
            sub.stop.set()
            sub.join(_CALL_TIMEOUT + 5)
            if sub.is_alive():
                raise errors.GanetiError("the submitter did not stop after the kill")
            new = list(sub.acked)
            figures.refused.update(sub.refused)
            figures.reused.update(j for j in new if j <= high)
            figures.reused.update(j for j, n in Counter(new).items() if n > 1)
            acked.extend(new)
            started = time.monotonic()
            handle.restart()
            figures.worst_restart = max(figures.worst_restart, time.monotonic() - started)
            statuses = _query_status(checker, acked)
            figures.lost.update(j for j, s in statuses.items() if s is None)
            figures.changed.update(j for j, s in final.items() if statuses.get(j) != s)
            high = max(high, max(new, default=0), _known_high(checker))
            figures.cycles = cycle
            if cycle % 10 == 0 or cycle == cycles:
                log(f"  kill9 cycle {cycle}: {len(acked)} acknowledged, {len(figures.lost)} lost")
        figures.acknowledged = len(acked)
        statuses = _wait_finished(checker, acked, _WAIT_FINISHED)
        figures.statuses.update(s or "lost" for s in statuses.values())
        figures.lost.update(j for j, s in statuses.items() if s is None)
        figures.changed.update(j for j, s in final.items() if statuses.get(j) != s)
        checker.close()
    finally:
        handle.close()
    return figures


# --- the full-disk cycle -----------------------------------------------------------

@dataclass
class FullDiskFigures:
    """What the full-disk cycle saw; :meth:`failed` when a shown state was not on disk."""

    skipped: str = ""
    accepted_before: int = 0
    accepted_full: int = 0
    refused_full: Counter[str] = field(default_factory=Counter)
    accepted_after: int = 0
    not_on_disk: set[int] = field(default_factory=set)
    changed_at_restart: set[int] = field(default_factory=set)
    statuses: Counter[str] = field(default_factory=Counter)
    drain_cleared: bool = False

    def failed(self) -> bool:
        return not self.skipped and bool(
            self.not_on_disk or self.changed_at_restart or not self.drain_cleared
            or self.statuses.keys() - FINAL)

    def line(self) -> str:
        if self.skipped:
            return f"fulldisk: skipped ({self.skipped})"
        finished = sum(n for s, n in self.statuses.items() if s in FINAL)
        return (f"fulldisk: accepted_before={self.accepted_before}"
                f" accepted_while_full={self.accepted_full}"
                f" refused_while_full={sum(self.refused_full.values())}"
                f" ({_tally(self.refused_full)}) accepted_after={self.accepted_after}"
                f" finished={finished} final_statuses={_tally(self.statuses)}"
                f" shown_not_on_disk={len(self.not_on_disk)}"
                f" changed_at_restart={len(self.changed_at_restart)}"
                f" drain_cleared={self.drain_cleared}")








def _disk_ops(handle: MasterdHandle, job_id: int) -> list[str] | None:
    try:
        with open(os.path.join(handle.paths.queue_dir, f"job-{job_id}"), "rb") as fh:
            return [op["status"] for op in serializer.loads(fh.read())["ops"]]
    except (OSError, errors.GanetiError, KeyError, TypeError):
        return None


def _check_on_disk(client: luxi.Client, handle: MasterdHandle, ids: list[int],
                   bad: set[int]) -> None:
    """Add to ``bad`` the jobs whose shown opcode statuses are not (yet) in their files.

    The master is asked first and the file read after, so a job moving on
    in between only makes the file look further along, never behind.
    """
    rows = client.QueryJobs(ids, ["opstatus"]) if ids else []
    for job_id, row in zip(ids, rows):
        disk = _disk_ops(handle, job_id)
        if row is None or disk is None or len(disk) != len(row[0]):
            bad.add(job_id)
            continue
        for shown, written in zip(row[0], disk):
            if _RANK[written] < _RANK[shown] or (shown in FINAL and written != shown):
                bad.add(job_id)


def _submit_one(client: luxi.Client, duration: float) -> tuple[int | None, str]:
    try:
        return client.SubmitJob([_delay(duration)]), ""
    except errors.GanetiError as exc:
        return None, type(exc).__name__


def run_full_disk(workdir: str, *, size: str = "2m", before: int = 20, full_seconds: float = 5.0,
                  after: int = 20, log: Any = print) -> FullDiskFigures:
    """Fill the queue's tmpfs while submitting, free it, and check what was shown.

    Skipped (with the reason) when a tmpfs cannot be mounted.  While full
    and after space returns, every acknowledged job's shown opcode
    statuses must be in its file; all must end once there is room, the
    drain flag must clear by itself, and a kill -9 and restart must not
    change any final status.
    """
    figures = FullDiskFigures()
    paths = prepare_root(os.path.join(workdir, "root"))
    figures.skipped = mount_tmpfs(paths.queue_dir, size, "the queue")
    if figures.skipped:
        return figures
    handle = None
    try:
        handle = start_masterd(workdir, workers=4)
        acked: list[int] = []
        with luxi.Client(handle.socket_path, rw_timeout=_CALL_TIMEOUT) as client:
            for _ in range(before):
                job_id, _err = _submit_one(client, 0.2)
                if job_id is not None:
                    acked.append(job_id)
            figures.accepted_before = len(acked)
            filler = fill(handle.paths.queue_dir)
            log(f"  fulldisk: queue filesystem full, submitting for {full_seconds:g}s")
            end = time.monotonic() + full_seconds
            while time.monotonic() < end:
                job_id, err = _submit_one(client, 0.05)
                if job_id is None:
                    figures.refused_full[err] += 1
                else:
                    figures.accepted_full += 1
                    acked.append(job_id)
                _check_on_disk(client, handle, acked, figures.not_on_disk)
                time.sleep(0.05)
            os.unlink(filler)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if client.QueryConfigValues(["drain_flag"]) == [False]:
                    figures.drain_cleared = True
                    break
                _check_on_disk(client, handle, acked, figures.not_on_disk)
                time.sleep(0.2)
            for _ in range(after if figures.drain_cleared else 0):
                job_id, _err = _submit_one(client, 0)
                if job_id is not None:
                    figures.accepted_after += 1
                    acked.append(job_id)
            statuses = _wait_finished(client, acked, _WAIT_FINISHED)
            _check_on_disk(client, handle, acked, figures.not_on_disk)
        figures.statuses.update(s or "lost" for s in statuses.values())
        handle.kill()
        handle.restart()
        with luxi.Client(handle.socket_path, rw_timeout=_CALL_TIMEOUT) as client:
            again = _query_status(client, acked)
        figures.changed_at_restart.update(j for j, s in statuses.items() if again.get(j) != s)
    finally:
        if handle is not None:
            handle.close()
        umount(paths.queue_dir)
    return figures
