"""Progress of long operations: typed log entries, rates, throttling, text.

Pure code (no I/O; the clock is passed in), shared by the master side
(LUs write entries into the opcode log), the node side (records of
running disk copies), the kvm plug-in (the ``jobs`` runtime field) and
the command line (the progress bar).  The formats are described in
doc/progress.md ("Progress entries", "Runtime jobs").

Two shapes:

* a **progress entry**, the message of an opcode log entry of type
  ``constants.ELOG_PROGRESS`` (:func:`entry`)::

      {"op": "migration", "cur": 1048576, "end": 268435456, "unit": "bytes",
       "rate": 52428800.0, "eta": 5.1, "done": False, "error": None}

  The last entry an operation writes has ``done`` true, and ``error`` the
  reason when it failed (:class:`Reporter` guarantees it).

* a **runtime job**, one element of the ``jobs`` list of an instance's
  runtime info (:func:`runtime_job`)::

      {"state": "normal", "info": {"jobType": "block", "opType": "copy",
       "cur": 1048576, "end": 268435456, "bandwidth": 0, "device": "disk/0",
       "rate": 52428800.0, "eta": 5.1}}

Both are plain JSON values, so clients that do not know them can still
print them (upstream's ``gnt-*`` print an unknown log type with ``str()``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "OPS", "UNIT_BYTES", "entry", "is_entry", "RateMeter", "Throttle", "Reporter",
    "runtime_job", "is_runtime_job", "format_bytes", "format_duration", "render_line",
    "render_bar", "render_runtime_job", "JOB_BLOCK", "JOB_MIGRATION", "BLOCK_OPS",
    "RuntimeTable", "table_emitter", "migration_figures", "MigrationProgress",
]

#: Operations that report progress (the ``op`` of an entry).
OPS = ("migration", "mirror", "disk-copy", "export", "import", "wipe", "image")
UNIT_BYTES = "bytes"
#: ``jobType`` values of a runtime job, and the ``opType`` values of block jobs.
JOB_BLOCK = "block"
JOB_MIGRATION = "migration"
BLOCK_OPS = ("copy", "rebase", "commit", "mirror")
_ENTRY_KEYS = frozenset(["op", "cur", "end", "unit", "rate", "eta", "done", "error"])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def entry(op: str, cur: int, end: int, *, rate: float | None = None,
          eta: float | None = None, done: bool = False,
          error: str | None = None) -> dict[str, Any]:
    """A progress entry (the message of an ``ELOG_PROGRESS`` log entry).

    ``cur`` and ``end`` are bytes (``end`` 0 when unknown); ``rate`` is
    bytes per second (0.0 when unknown), ``eta`` seconds left or None.
    A final entry (``done``) has no eta.  Raises :class:`ValueError` for
    negative or non-numeric figures (a programming error of the caller).
    """
    if not (_number(cur) and _number(end)) or cur < 0 or end < 0:
        raise ValueError(f"bad progress figures cur={cur!r} end={end!r}")
    return {"op": str(op), "cur": int(cur), "end": int(end), "unit": UNIT_BYTES,
            "rate": float(rate) if rate else 0.0,
            "eta": None if done or eta is None else round(float(eta), 1),
            "done": bool(done), "error": None if error is None else str(error)}


def is_entry(message: Any) -> bool:
    """True when ``message`` has the shape of a progress entry."""
    return (isinstance(message, dict) and _ENTRY_KEYS <= message.keys()
            and _number(message["cur"]) and _number(message["end"]))


class RateMeter:
    """Rate and time left from successive ``(time, bytes done)`` samples.

    The rate is taken over a sliding window of ``window`` seconds (at
    least the two last samples), so a short stall or burst does not swing
    the estimate; a counter that goes backwards (a restarted copy) starts
    the window over.
    """

    def __init__(self, clock: Callable[[], float], window: float = 5.0) -> None:
        self._clock = clock
        self._window = window
        self._samples: list[tuple[float, int]] = []

    def add(self, cur: int, now: float | None = None) -> None:
        """Record that ``cur`` bytes are done (at ``now``, default the clock)."""
        when = self._clock() if now is None else now
        if self._samples and cur < self._samples[-1][1]:
            self._samples.clear()
        self._samples.append((when, cur))
        while len(self._samples) > 2 and when - self._samples[1][0] >= self._window:
            del self._samples[0]

    def rate(self) -> float:
        """Bytes per second over the window; 0.0 before two samples."""
        if len(self._samples) < 2:
            return 0.0
        (t0, c0), (t1, c1) = self._samples[0], self._samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0

    def eta(self, end: int) -> float | None:
        """Seconds until ``end`` bytes at the current rate; None when unknown."""
        rate = self.rate()
        if not self._samples or rate <= 0 or end <= 0:
            return None
        return max(0.0, (end - self._samples[-1][1]) / rate)


class Throttle:
    """Decides which updates become log entries, so a job log is not flooded.

    An update passes when ``min_interval`` seconds passed since the last
    one that passed *and* it moved by at least ``min_fraction`` of the
    total (or ``max_interval`` seconds passed, a heartbeat for a stalled
    operation); the first update, a changed total and the final one always
    pass.  An operation thus writes at most about ``1 / min_fraction``
    entries plus heartbeats, and never more than one per ``min_interval``.
    """

    def __init__(self, clock: Callable[[], float], *, min_interval: float = 1.0,
                 min_fraction: float = 0.01, max_interval: float = 10.0) -> None:
        self._clock = clock
        self.min_interval = min_interval
        self.min_fraction = min_fraction
        self.max_interval = max_interval
        self._last: tuple[float, int, int] | None = None

    def passes(self, cur: int, end: int, *, final: bool = False) -> bool:
        """Whether this update should be written (and if so, note it)."""
        now = self._clock()
        ok = final or self._last is None or end != self._last[2]
        if not ok and self._last is not None:
            when, last_cur, _ = self._last
            elapsed = now - when
            moved = abs(cur - last_cur) >= self.min_fraction * end if end else cur != last_cur
            ok = elapsed >= self.min_interval and (moved or elapsed >= self.max_interval)
        if ok:
            self._last = (now, cur, end)
        return ok


class Reporter:
    """Turns updates of one operation into throttled progress entries.

    ``emit(entry)`` writes one entry (an LU's ``LogProgress``, a test's
    list).  Use it as a context manager: leaving the block always writes
    the final entry, ``done`` with the last figures, and with ``error``
    set to the exception's text when the block raised (the exception goes
    on)::

        with Reporter(emit, "disk-copy", clock=time.monotonic) as rep:
            for ...:
                rep.update(done_bytes, total_bytes)

    :meth:`finish` may also be called directly (once; later calls and the
    block's end then write nothing more).
    """

    def __init__(self, emit: Callable[[dict[str, Any]], None], op: str, *,
                 clock: Callable[[], float], end: int = 0,
                 throttle: Throttle | None = None, meter: RateMeter | None = None) -> None:
        self._emit = emit
        self.op = op
        self._clock = clock
        self.cur = 0
        self.end = end
        self.throttle = throttle if throttle is not None else Throttle(clock)
        self.meter = meter if meter is not None else RateMeter(clock)
        self._started = clock()
        self.finished = False

    def update(self, cur: int, end: int | None = None, *, rate: float | None = None,
               eta: float | None = None) -> bool:
        """Record progress; returns True when an entry was written.

        ``rate``/``eta`` given by the source (qemu knows its own speed)
        win over the meter's estimate.  An update reaching ``end`` writes
        nothing: the final entry follows.
        """
        if self.finished:
            return False
        if end is not None:
            self.end = end
        self.cur = cur
        self.meter.add(cur)
        if 0 < self.end <= cur:    # complete: the final entry says so
            return False
        if not self.throttle.passes(cur, self.end):
            return False
        self._emit(entry(self.op, cur, self.end,
                         rate=self.meter.rate() if rate is None else rate,
                         eta=self.meter.eta(self.end) if eta is None else eta))
        return True

    def finish(self, error: str | None = None, *, cur: int | None = None) -> None:
        """Write the final entry (``done``; ``error`` when it failed).

        On success the average rate of the whole operation is reported.
        """
        if self.finished:
            return
        self.finished = True
        if cur is not None:
            self.cur = cur
        elapsed = self._clock() - self._started
        rate = self.cur / elapsed if elapsed > 0 else 0.0
        self._emit(entry(self.op, self.cur, self.end, rate=rate, done=True, error=error))

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.finish(None if exc is None else (str(exc) or exc.__class__.__name__))


def migration_figures(status: dict[str, Any]) -> dict[str, tuple[int, int, float | None]]:
    """``{op: (cur, end, rate)}`` from a hypervisor's migration status.

    ``migration`` from ``ram`` (done: ``total - remaining``; rate from
    qemu's ``mbps``, megabits per second), ``mirror`` from the sum of ``disks`` (rate: the sum of their
    ``speed``); an op whose figures are absent is left out.  The status
    dict is the hypervisor contract's (``get_migration_status``).
    """
    result: dict[str, tuple[int, int, float | None]] = {}
    ram = status.get("ram")
    if isinstance(ram, dict) and _number(ram.get("total")):
        mbps: Any = status.get("mbps")
        rate = float(mbps) * 1e6 / 8 if _number(mbps) and mbps > 0 else None
        total = max(0, int(ram["total"]))
        # qemu sends dirtied pages again: "transferred" may pass "total";
        # what is left to send says how far it got
        if _number(ram.get("remaining")):
            cur = total - int(ram["remaining"])
        else:
            cur = int(ram.get("transferred") or 0)
        result["migration"] = (min(total, max(0, cur)), total, rate)
    disks = status.get("disks")
    if isinstance(disks, list) and disks:
        rows = [d for d in disks if isinstance(d, dict) and _number(d.get("end"))]
        if rows:
            speed = sum(float(d.get("speed") or 0) for d in rows)
            result["mirror"] = (sum(max(0, int(d.get("cur") or 0)) for d in rows),
                                sum(max(0, int(d["end"])) for d in rows), speed or None)
    return result


class MigrationProgress:
    """Progress entries of a migration from its successive status dicts.

    One :class:`Reporter` per op seen in the statuses (``migration``, and
    ``mirror`` when disks are mirrored), made by ``make_reporter(op)``.
    As a context manager, every reporter writes its final entry when the
    block ends (with the error when it raised).
    """

    def __init__(self, make_reporter: Callable[[str], Reporter],
                 always: tuple[str, ...] = ("migration",)) -> None:
        self._make = make_reporter
        #: the ``always`` ops exist from the start: their final entry is
        #: written even when the migration fails before any status
        self.reporters: dict[str, Reporter] = {op: make_reporter(op) for op in always}

    def update(self, status: dict[str, Any]) -> None:
        """Feed one ``get_migration_status`` answer."""
        for op, (cur, end, rate) in migration_figures(status or {}).items():
            rep = self.reporters.get(op)
            if rep is None:
                rep = self.reporters[op] = self._make(op)
            rep.update(cur, end, rate=rate)

    def finish(self, error: str | None = None) -> None:
        for rep in self.reporters.values():
            rep.finish(error)

    def __enter__(self) -> MigrationProgress:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.finish(None if exc is None else (str(exc) or exc.__class__.__name__))


# runtime jobs (the ``jobs`` runtime field) ----------------------------------------
def runtime_job(job_type: str, cur: int, end: int, *, op_type: str | None = None,
                device: str | None = None, bandwidth: int = 0, rate: float = 0.0,
                eta: float | None = None, state: str = "normal") -> dict[str, Any]:
    """One element of an instance's ``jobs`` runtime list (doc/progress.md, "Runtime jobs").

    ``job_type`` is :data:`JOB_BLOCK` (with ``op_type`` one of
    :data:`BLOCK_OPS` and a ``device``) or :data:`JOB_MIGRATION`;
    ``bandwidth`` is the limit in MiB/s (0 = none); ``state`` ``normal``,
    or ``unknown`` when the figures could not be read.
    """
    info: dict[str, Any] = {"jobType": job_type}
    if job_type == JOB_BLOCK:
        info["opType"] = op_type or "copy"
        info["device"] = device or ""
    info.update({"cur": int(cur), "end": int(end), "bandwidth": int(bandwidth),
                 "rate": float(rate), "eta": None if eta is None else round(float(eta), 1)})
    return {"state": state, "info": info}


def is_runtime_job(value: Any) -> bool:
    """True when ``value`` has the shape of a runtime job."""
    return (isinstance(value, dict) and isinstance(value.get("info"), dict)
            and "state" in value and "jobType" in value["info"])


class RuntimeTable:
    """The runtime jobs of operations the master drives, by instance name.

    Disk copies of ``move``, exports and imports are driven by a job on
    the master (it polls or moves the data chunk by chunk), and the
    instance is often stopped meanwhile, so no hypervisor reports them:
    the LU's reporter publishes each entry it writes here
    (:func:`table_emitter`) and drops it at the end (doc/progress.md,
    "Runtime jobs").
    Thread-safe.
    """

    def __init__(self) -> None:
        import threading   # here: the CLI imports this module, and never this class
        self._lock = threading.Lock()
        self._jobs: dict[str, dict[str, dict[str, Any]]] = {}

    def publish(self, instance: str, key: str, job: dict[str, Any]) -> None:
        """Set the runtime job ``key`` (one per running operation) of ``instance``."""
        with self._lock:
            self._jobs.setdefault(instance, {})[key] = job

    def drop(self, instance: str, key: str) -> None:
        """The operation ``key`` ended: forget its job."""
        with self._lock:
            jobs = self._jobs.get(instance)
            if jobs is not None:
                jobs.pop(key, None)
                if not jobs:
                    del self._jobs[instance]

    def jobs(self, instance: str) -> list[dict[str, Any]]:
        """The running jobs of ``instance`` (copies, in publication order)."""
        with self._lock:
            return [dict(job, info=dict(job["info"]))
                    for job in self._jobs.get(instance, {}).values()]


def table_emitter(emit: Callable[[dict[str, Any]], None], table: RuntimeTable | None,
                  instance: str, key: str, *, op_type: str = "copy",
                  device: str = "") -> Callable[[dict[str, Any]], None]:
    """Wrap ``emit`` (a reporter's) so that each entry also updates ``table``:
    a block job of ``instance`` while running, nothing once ``done``."""
    if table is None:
        return emit

    def both(message: dict[str, Any]) -> None:
        if message.get("done"):
            table.drop(instance, key)
        else:
            table.publish(instance, key, runtime_job(
                JOB_BLOCK, message["cur"], message["end"], op_type=op_type, device=device,
                rate=message.get("rate") or 0.0, eta=message.get("eta")))
        emit(message)
    return both


# text ---------------------------------------------------------------------------
def format_bytes(count: float) -> str:
    """Bytes for humans: ``512 B``, ``3.0 KiB``, ``12.5 MiB``, ``1.2 GiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """Seconds as ``42s``, ``3m05s`` or ``2h07m``."""
    secs = int(round(seconds))
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"


def _percent(cur: float, end: float) -> str:
    return f"{min(100.0, 100.0 * cur / end):5.1f}%" if end > 0 else "    ?%"


def _figures(cur: float, end: float, rate: float, eta: Any) -> str:
    parts = [f"{format_bytes(cur)}/{format_bytes(end)}" if end > 0 else format_bytes(cur)]
    if rate:
        parts.append(f"{format_bytes(rate)}/s")
    if _number(eta):
        parts.append(f"eta {format_duration(eta)}")
    return ", ".join(parts)


def render_line(message: dict[str, Any]) -> str:
    """A progress entry as one plain line (logs, pipes, non-terminals)."""
    op = message.get("op", "progress")
    cur, end = message.get("cur", 0), message.get("end", 0)
    if message.get("done"):
        if message.get("error"):
            return f"{op}: failed at {_percent(cur, end).strip()}: {message['error']}"
        if not cur and not end:      # the source never gave figures
            return f"{op}: done"
        rate = message.get("rate") or 0.0
        avg = f", {format_bytes(rate)}/s" if rate else ""
        return f"{op}: done, {format_bytes(cur)}{avg}"
    return (f"{op}: {_percent(cur, end).strip()}"
            f" ({_figures(cur, end, message.get('rate') or 0.0, message.get('eta'))})")


def render_bar(message: dict[str, Any], width: int = 80) -> str:
    """A progress entry as a bar fitting ``width`` columns (a terminal line)."""
    if message.get("done"):
        return render_line(message)[:width]
    op = str(message.get("op", "progress"))
    cur, end = message.get("cur", 0), message.get("end", 0)
    tail = f" {_percent(cur, end)} {_figures(cur, end, message.get('rate') or 0.0, message.get('eta'))}"
    room = width - len(op) - len(tail) - 3
    if room < 10:
        return render_line(message)[:width]
    filled = int(room * min(1.0, cur / end)) if end > 0 else 0
    return f"{op} [{'#' * filled}{'.' * (room - filled)}]{tail}"


def render_runtime_job(job: dict[str, Any]) -> str:
    """One runtime job as a line for ``gnt-instance info``."""
    info = job.get("info") or {}
    kind = str(info.get("jobType", "?"))
    if kind == JOB_BLOCK:
        kind = f"block {info.get('opType', '?')} {info.get('device', '')}".rstrip()
    if job.get("state") not in (None, "normal"):
        kind += f" ({job.get('state')})"
    cur, end = info.get("cur", 0) or 0, info.get("end", 0) or 0
    text = f"{kind}: {_percent(cur, end).strip()} ({_figures(cur, end, info.get('rate') or 0.0, info.get('eta'))})"
    if info.get("bandwidth"):
        text += f", limit {info['bandwidth']} MiB/s"
    return text
