"""The ``jobs`` runtime field of a kvm instance, from QMP replies (pure).

:func:`runtime_jobs` turns the replies of ``query-migrate`` and
``query-block-jobs`` into runtime jobs (doc/progress.md, "Runtime jobs"):
one ``migration`` job while a migration is under way, one ``block`` job
per qemu block job.  Rates:

* a migration's rate is qemu's own measure (``ram.mbps``, megabits per
  second), its time left ``ram.remaining`` divided by that rate;
* a block job has no measured speed in qemu (its ``speed`` is the
  *limit*, which becomes ``bandwidth``), so its rate comes from two
  samples ``(time, offset)``: the caller keeps the samples between calls
  (the plug-in in the instance's run dir) and passes them back in; the
  rate is 0.0 until a second sample exists.

A block job's ``device`` is the disk as the operator knows it
(``disk/0``, :func:`disk_name`): qemu names a job by its job id
(``ganeti-mirror-disk0`` for ours, ``mirror.py``) or, without one, by its
drive (``disk0``).  qemu's own name stays in ``job``, for QMP commands on
the job.

No I/O and no clock here: ``now`` is passed in.
"""

from __future__ import annotations

from typing import Any

from ganeti import progress
from ganeti.hypervisor.kvm import mirror

__all__ = ["runtime_jobs", "migration_job", "block_job", "disk_name", "BLOCK_OP_TYPES",
           "ACTIVE_MIGRATION", "MIN_SAMPLE_AGE"]

#: qemu's block job ``type`` -> our ``opType``
BLOCK_OP_TYPES = {"mirror": "mirror", "stream": "rebase", "commit": "commit",
                  "backup": "copy"}
#: ``query-migrate`` statuses of a migration under way
ACTIVE_MIGRATION = frozenset(["setup", "active", "pre-switchover", "device",
                              "postcopy-active", "postcopy-paused", "postcopy-recover",
                              "wait-unplug", "cancelling"])
#: a stored sample is replaced only once it is this old (seconds), so that
#: frequent queries still measure over a useful interval
MIN_SAMPLE_AGE = 1.0
_MiB = 1024 * 1024

Samples = dict[str, list[float]]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def disk_name(job_device: str) -> str:
    """The disk of a block job's ``device``: ``disk0`` or ``ganeti-mirror-disk0`` -> ``disk/0``.

    Other names (a hotplugged disk's node name, someone else's job id) are
    returned unchanged: they tell no disk index.
    """
    drive = job_device.removeprefix(mirror.JOB_PREFIX)
    if drive.startswith("disk") and drive[4:].isdigit():
        return f"disk/{int(drive[4:])}"
    return job_device


def migration_job(reply: Any, bandwidth_mib: int = 0) -> dict[str, Any] | None:
    """The runtime job of a ``query-migrate`` reply; None when none runs."""
    if not isinstance(reply, dict) or reply.get("status") not in ACTIVE_MIGRATION:
        return None
    raw = reply.get("ram")
    ram: dict[str, Any] = raw if isinstance(raw, dict) else {}
    total, remaining = _int(ram.get("total")), _int(ram.get("remaining"))
    transferred = _int(ram.get("transferred"))
    cur = max(0, total - remaining) if total else transferred
    mbps = ram.get("mbps")
    rate = float(mbps) * 1e6 / 8 if isinstance(mbps, (int, float)) and mbps > 0 else 0.0
    eta = remaining / rate if rate and total else None
    return progress.runtime_job(progress.JOB_MIGRATION, cur, total, bandwidth=bandwidth_mib,
                                rate=rate, eta=eta)


def block_job(job: Any, now: float, samples: Samples,
              new_samples: Samples) -> dict[str, Any] | None:
    """The runtime job of one ``query-block-jobs`` element (None if malformed).

    Reads the job's earlier sample from ``samples`` and records the one
    to keep in ``new_samples`` (both keyed by qemu's job name).
    """
    if not isinstance(job, dict) or not isinstance(job.get("device"), str):
        return None
    device = job["device"]
    cur, end = _int(job.get("offset")), _int(job.get("len"))
    rate = 0.0
    old = samples.get(device)
    keep = [now, float(cur)]
    if isinstance(old, list) and len(old) == 2 and old[1] <= cur and old[0] < now:
        rate = (cur - old[1]) / (now - old[0])
        if now - old[0] < MIN_SAMPLE_AGE:
            keep = [float(old[0]), float(old[1])]
    new_samples[device] = keep
    eta = (end - cur) / rate if rate > 0 and end else None
    state = "normal" if job.get("io-status", "ok") == "ok" else "unknown"
    entry = progress.runtime_job(progress.JOB_BLOCK, cur, end,
                                 op_type=BLOCK_OP_TYPES.get(str(job.get("type")), "copy"),
                                 device=disk_name(device),
                                 bandwidth=_int(job.get("speed")) // _MiB,
                                 rate=rate, eta=eta, state=state)
    entry["info"]["job"] = device
    return entry


def runtime_jobs(migrate: Any, block_jobs: Any, *, now: float, samples: Samples | None = None,
                 bandwidth_mib: int = 0) -> tuple[list[dict[str, Any]], Samples]:
    """``(jobs, samples to keep)`` from a ``query-migrate`` and a
    ``query-block-jobs`` reply (either may be None when not asked).

    ``bandwidth_mib`` is the migration's speed limit (the instance's
    ``migration_bandwidth``); samples of block jobs that ended are dropped.
    """
    jobs: list[dict[str, Any]] = []
    kept: Samples = {}
    mig = migration_job(migrate, bandwidth_mib)
    if mig is not None:
        jobs.append(mig)
    for job in block_jobs if isinstance(block_jobs, list) else []:
        entry = block_job(job, now, samples or {}, kept)
        if entry is not None:
            jobs.append(entry)
    return jobs, kept
