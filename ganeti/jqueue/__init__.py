"""The job queue: job model, durable storage, dependencies, workers.

* :mod:`.job`: the pure job/opcode model, status rules and disk format.
* :mod:`.storage`: queue files with group commit and replication hooks.
* :mod:`.deps`: dependency evaluation and the waiting list.
* :mod:`.queue`: :class:`JobQueue`, submission, scheduling and waiting.
"""

from __future__ import annotations

from ganeti.jqueue.job import QueuedJob, QueuedOpCode, calc_status
from ganeti.jqueue.queue import JobQueue
from ganeti.jqueue.storage import JobStorage

__all__ = ["JobQueue", "JobStorage", "QueuedJob", "QueuedOpCode", "calc_status"]
