"""The job queue: job model, durable storage, dependencies, workers.

* :mod:`.job`: the pure job/opcode model, status transitions and disk format.
* :mod:`.storage`: queue files with group commit and replication hooks.
* :mod:`.table`: :class:`~ganeti.jqueue.table.JobTable`, the jobs a queue
  knows by id (live, finished, reserved, corrupt) and the lock guarding them.
* :mod:`.adopt`: reading job files the queue did not write (start-up, PickupJob).
* :mod:`.deps`: dependency evaluation and the waiting list.
* :mod:`.callbacks`: what a running opcode may do to its job.
* :mod:`.submission`: checking submitted opcodes and building new jobs.
* :mod:`.lookup`: the read side (job lists, QueryJobs, WaitForJobChange).
* :mod:`.queue`: :class:`JobQueue`, submission, scheduling, control; it
  delegates to the modules above.
"""

from __future__ import annotations

from ganeti.jqueue.job import QueuedJob, QueuedOpCode, calc_status
from ganeti.jqueue.queue import JobQueue
from ganeti.jqueue.storage import JobStorage

__all__ = ["JobQueue", "JobStorage", "QueuedJob", "QueuedOpCode", "calc_status"]
