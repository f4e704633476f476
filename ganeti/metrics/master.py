"""The master daemon's own figures (doc/metrics.md), on one :class:`MasterMetrics`.

Built once in ``server/masterd.py`` and handed to the parts that observe
events: the job queue (``job_started``/``job_finished``), the processor
(``lock_wait``), the RPC runner (``rpc_call``) and the ConfigWriter
(``config_written``).  Figures read when asked (jobs by status,
replication lag) are collectors registered with :meth:`MasterMetrics.watch`.
LUXI ``QueryMetrics`` answers :meth:`MasterMetrics.snapshot`; ganeti-rapi
serves it at ``GET /metrics`` (:func:`ganeti.metrics.render_openmetrics`)
and ``gnt-debug metrics`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ganeti import metrics

__all__ = ["MasterMetrics", "SIZE_BUCKETS"]

#: Buckets (bytes) of the config size histogram: 4 KiB to 256 MiB.
SIZE_BUCKETS: tuple[float, ...] = tuple(float(4096 * 4 ** k) for k in range(9))


def _seconds(ts: Any) -> float | None:
    """``[seconds, microseconds]`` -> seconds (None when not a timestamp)."""
    if isinstance(ts, (list, tuple)) and len(ts) == 2:
        return ts[0] + ts[1] / 1e6
    return None


class MasterMetrics:
    """The master's metric families and the calls that move them."""

    def __init__(self) -> None:
        reg = self.registry = metrics.Registry()
        self.job_start = reg.histogram(
            "ganeti_job_start_latency_seconds",
            "Seconds from a job's submission to the start of its first opcode", unit="seconds")
        self.job_end = reg.histogram(
            "ganeti_job_end_latency_seconds",
            "Seconds from a job's submission to its end, by final status", ["status"],
            unit="seconds")
        self.lock_wait = reg.histogram(
            "ganeti_lock_wait_seconds",
            "Seconds an opcode waited to acquire its locks, per lock level", ["level"],
            unit="seconds")
        self.rpc_latency = reg.histogram(
            "ganeti_rpc_latency_seconds",
            "Seconds of one node RPC call (one node), per procedure", ["procedure"],
            unit="seconds")
        self.rpc_failures = reg.counter(
            "ganeti_rpc_failures", "Node RPC calls that failed (transport or remote), per node",
            ["node"])
        self.config_write = reg.histogram(
            "ganeti_config_write_seconds", "Seconds of one durable configuration write",
            unit="seconds")
        self.config_size = reg.gauge(
            "ganeti_config_size_bytes", "Size of the configuration file last written",
            unit="bytes")

    # observations -------------------------------------------------------------
    def job_started(self, received: Any, started: Any) -> None:
        """A job's first opcode started (timestamps as ``[s, us]``)."""
        a, b = _seconds(received), _seconds(started)
        if a is not None and b is not None:
            self.job_start.observe(max(0.0, b - a))

    def job_finished(self, received: Any, ended: Any, status: str) -> None:
        """A job ended with ``status``."""
        a, b = _seconds(received), _seconds(ended)
        if a is not None and b is not None:
            self.job_end.observe(max(0.0, b - a), status=status)

    def lock_waited(self, level: str, seconds: float) -> None:
        self.lock_wait.observe(seconds, level=level)

    def rpc_call(self, procedure: str, node: str, seconds: float, ok: bool) -> None:
        self.rpc_latency.observe(seconds, procedure=procedure)
        if not ok:
            self.rpc_failures.inc(node=node)

    def config_written(self, seconds: float, size: int) -> None:
        self.config_write.observe(seconds)
        self.config_size.set(size)

    # collectors ----------------------------------------------------------------
    def watch(self, *, jobs_by_status: Callable[[], Mapping[str, int]] | None = None,
              replication_lag: Callable[[], Mapping[str, float]] | None = None) -> None:
        """Register the figures read when asked (each at most once)."""
        if jobs_by_status is not None:
            def jobs() -> list[tuple[dict[str, str], float]]:
                return [({"status": s}, float(n)) for s, n in jobs_by_status().items()]
            self.registry.gauge("ganeti_jobs", "Unarchived jobs, by status", ["status"],
                                collector=jobs)
        if replication_lag is not None:
            def lag() -> list[tuple[dict[str, str], float]]:
                return [({"candidate": c}, float(n)) for c, n in replication_lag().items()]
            self.registry.gauge(
                "ganeti_replication_lag_serials",
                "Configuration serials a master candidate is behind the master", ["candidate"],
                collector=lag)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every family as plain data (see :mod:`ganeti.metrics`)."""
        return self.registry.snapshot()
