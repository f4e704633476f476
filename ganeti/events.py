"""The cluster event stream: records, a bounded buffer, subscribers, filters, SSE.

masterd publishes each event once on one :class:`EventBus` (the job queue
for job events, the configuration's change hook for instance and node
events); readers ask for "everything after id N" (LUXI ``WaitForEvents``,
doc/protocols/luxi.md, "Events") and RAPI turns that into Server-Sent
Events (:func:`encode_sse`).  The protocol: doc/protocols/events.md.

No threads and no sockets here.  The bus has one lock and one condition:
:meth:`EventBus.publish` holds the lock for a deque append and a few
non-blocking queue offers, never waits, and never calls out, so a
publisher (which may hold the job queue's lock) is never slowed by a
reader.  Memory is bounded twice: the ring buffer keeps the newest
``capacity`` events, and each push :class:`Subscription` holds at most
``maxlen``.

Gaps: a reader whose last id fell out of the buffer (or that comes from
an earlier master daemon: ids start from the wall clock in microseconds
at start-up, so they grow across restarts) gets a ``gap`` event first; a
push subscription that overflows is ended with a ``gap`` event (and
counted in :attr:`EventBus.dropped`); the reader resumes from the buffer
with the last id it saw.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ganeti import constants, errors, query, serializer

__all__ = [
    "Event", "EventBuffer", "EventBus", "EventFilter", "Subscription",
    "EVENT_TYPES", "EV_GAP", "EV_JOB_SUBMITTED", "EV_JOB_STATUS", "EV_JOB_FINISHED",
    "EV_JOB_LOG", "EV_INSTANCE_ADDED", "EV_INSTANCE_REMOVED", "EV_INSTANCE_STATE",
    "EV_NODE_ADDED", "EV_NODE_REMOVED", "EV_NODE_ROLE", "EVENT_FIELDS",
    "DEFAULT_CAPACITY", "DEFAULT_QUEUE_LEN", "event_to_dict", "event_from_dict",
    "encode_sse", "encode_sse_event", "encode_sse_comment", "parse_sse",
    "initial_event_id", "make_gap",
]

logger = logging.getLogger(__name__)

EV_GAP = "gap"
EV_JOB_SUBMITTED = "job.submitted"
EV_JOB_STATUS = "job.status"
EV_JOB_FINISHED = "job.finished"
EV_JOB_LOG = "job.log"
EV_INSTANCE_ADDED = "instance.added"
EV_INSTANCE_REMOVED = "instance.removed"
EV_INSTANCE_STATE = "instance.state"
EV_NODE_ADDED = "node.added"
EV_NODE_REMOVED = "node.removed"
EV_NODE_ROLE = "node.role"

#: Every event type, in the order doc/protocols/events.md lists them.
EVENT_TYPES: frozenset[str] = frozenset([
    EV_GAP, EV_JOB_SUBMITTED, EV_JOB_STATUS, EV_JOB_FINISHED, EV_JOB_LOG,
    EV_INSTANCE_ADDED, EV_INSTANCE_REMOVED, EV_INSTANCE_STATE,
    EV_NODE_ADDED, EV_NODE_REMOVED, EV_NODE_ROLE,
])

#: Events the master keeps for readers that resume.
DEFAULT_CAPACITY = 4096
#: Events a push subscription holds before it is ended with a gap.
DEFAULT_QUEUE_LEN = 1024

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def initial_event_id(clock: Callable[[], float] = time.time) -> int:
    """The id before a fresh bus's first event: wall-clock microseconds.

    A master daemon started later begins above every id an earlier one
    gave out (unless the clock went back), so a reader holding an old id
    is told about the gap instead of missing events silently.
    """
    return int(clock() * 1e6)


@dataclass(frozen=True)
class Event:
    """One event: ``id`` (grows by one per event), ``type`` (``EV_*``),
    ``time`` (wall-clock seconds), the objects it is about (``job_id``,
    ``instance``, ``node``: None when not about one) and ``data`` (JSON
    values, per type: doc/protocols/events.md)."""

    id: int
    type: str
    time: float
    job_id: int | None = None
    instance: str | None = None
    node: str | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)


def event_to_dict(event: Event) -> dict[str, Any]:
    """The wire form: ``{"id", "type", "time", "job_id", "instance", "node", "data"}``."""
    return {"id": event.id, "type": event.type, "time": event.time, "job_id": event.job_id,
            "instance": event.instance, "node": event.node, "data": dict(event.data)}


def event_from_dict(raw: Any) -> Event:
    """Rebuild an event from :func:`event_to_dict`'s form (e.g. received over LUXI).

    Raises :class:`errors.ParameterError` for a wrong shape.
    """
    def bad(what: str) -> errors.ParameterError:
        return errors.ParameterError(f"Invalid event: {what}", errors.ECODE_INVAL)

    if not isinstance(raw, dict):
        raise bad("not an object")
    ev_id, ev_type, ev_time = raw.get("id"), raw.get("type"), raw.get("time")
    if not isinstance(ev_id, int) or isinstance(ev_id, bool) or ev_id < 0:
        raise bad(f"id {ev_id!r}")
    if not isinstance(ev_type, str) or not ev_type:
        raise bad(f"type {ev_type!r}")
    if not isinstance(ev_time, (int, float)) or isinstance(ev_time, bool):
        raise bad(f"time {ev_time!r}")
    job_id = raw.get("job_id")
    if job_id is not None and (not isinstance(job_id, int) or isinstance(job_id, bool)):
        raise bad(f"job_id {job_id!r}")
    names = [raw.get("instance"), raw.get("node")]
    if any(n is not None and not isinstance(n, str) for n in names):
        raise bad("instance/node must be strings or null")
    data = raw.get("data")
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise bad("data must be an object")
    return Event(ev_id, ev_type, float(ev_time), job_id, names[0], names[1],
                 MappingProxyType(dict(data)))


# --- filters ------------------------------------------------------------------

def _nodata_if_none(attr: str) -> query.Getter:
    def getter(ctx: Any, event: Event) -> Any:
        value = getattr(event, attr)
        return query.NODATA if value is None else value
    return getter


def _data_key(key: str) -> query.Getter:
    def getter(ctx: Any, event: Event) -> Any:
        return event.data.get(key, query.NODATA)
    return getter


#: The query2 fields an event filter may use (doc/protocols/events.md, "Filters").
EVENT_FIELDS = query.make_table([
    query.FieldDef("id", "Id", constants.QFT_NUMBER, "Event id",
                   lambda ctx, ev: ev.id),
    query.FieldDef("type", "Type", constants.QFT_TEXT, "Event type (job.status, node.role...)",
                   lambda ctx, ev: ev.type),
    query.FieldDef("time", "Time", constants.QFT_TIMESTAMP, "When the event happened",
                   lambda ctx, ev: ev.time),
    query.FieldDef("job_id", "JobID", constants.QFT_NUMBER, "Job the event is about",
                   _nodata_if_none("job_id")),
    query.FieldDef("instance", "Instance", constants.QFT_TEXT, "Instance the event is about",
                   _nodata_if_none("instance")),
    query.FieldDef("node", "Node", constants.QFT_TEXT, "Node the event is about",
                   _nodata_if_none("node")),
    query.FieldDef("status", "Status", constants.QFT_TEXT,
                   "Job status (job events) or admin state (instance.state)",
                   _data_key("status")),
    query.FieldDef("role", "Role", constants.QFT_TEXT, "Node role (node events)",
                   _data_key("role")),
    query.FieldDef("data", "Data", constants.QFT_OTHER, "The whole event payload",
                   lambda ctx, ev: dict(ev.data)),
])


class EventFilter:
    """Which events a reader wants: ``job_ids`` (None: any) and a query2
    ``qfilter`` over :data:`EVENT_FIELDS` (None: any).

    ``job_ids`` keeps only events about those jobs (so no instance or node
    events).  Gap events always match: a reader must learn it missed
    something.  Raises :class:`errors.QueryFilterParseError` for an invalid
    filter and :class:`errors.ParameterError` for bad job ids.
    """

    def __init__(self, job_ids: Iterable[Any] | None = None, qfilter: Any = None) -> None:
        self.job_ids: frozenset[int] | None = None
        if job_ids is not None:
            ids = set()
            for job_id in job_ids:
                if isinstance(job_id, str) and job_id.isascii() and job_id.isdigit():
                    job_id = int(job_id)
                if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id < 1:
                    raise errors.ParameterError(f"Invalid job id in event filter: {job_id!r}",
                                                errors.ECODE_INVAL)
                ids.add(job_id)
            self.job_ids = frozenset(ids)
        self._predicate = query.compile_filter(EVENT_FIELDS, qfilter) if qfilter else None

    @classmethod
    def from_wire(cls, raw: Any) -> EventFilter:
        """From LUXI's ``{"jobs": [ids] or null, "filter": qfilter or null}`` (or null)."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict) or set(raw) - {"jobs", "filter"}:
            raise errors.ParameterError(
                "Event filter must be null or an object with 'jobs' and/or 'filter'",
                errors.ECODE_INVAL)
        jobs = raw.get("jobs")
        if jobs is not None and not isinstance(jobs, list):
            raise errors.ParameterError("Event filter 'jobs' must be a list of job ids",
                                        errors.ECODE_INVAL)
        return cls(jobs, raw.get("filter"))

    @property
    def matches_all(self) -> bool:
        return self.job_ids is None and self._predicate is None

    def __call__(self, event: Event) -> bool:
        if event.type == EV_GAP:
            return True
        if self.job_ids is not None and event.job_id not in self.job_ids:
            return False
        return self._predicate is None or self._predicate(None, event)


_ALL = EventFilter()


# --- buffer -------------------------------------------------------------------

class EventBuffer:
    """The newest ``capacity`` events, oldest first, with resume by id.

    Not locked: :class:`EventBus` holds its lock around every call.
    Ids are consecutive: the buffer knows which ids it dropped.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, last_id: int = 0) -> None:
        if capacity < 1:
            raise errors.ProgrammerError("An event buffer needs room for at least one event")
        self._events: collections.deque[Event] = collections.deque(maxlen=capacity)
        self.last_id = last_id

    @property
    def capacity(self) -> int:
        return self._events.maxlen or 0

    @property
    def first_id(self) -> int:
        """The oldest id still held (``last_id + 1`` when empty)."""
        return self._events[0].id if self._events else self.last_id + 1

    def __len__(self) -> int:
        return len(self._events)

    def append(self, event: Event) -> None:
        """Add the next event; its id must be ``last_id + 1``."""
        if event.id != self.last_id + 1:
            raise errors.ProgrammerError(
                f"Event id {event.id} does not follow {self.last_id}")
        self._events.append(event)
        self.last_id = event.id

    def since(self, last_id: int, now: float, limit: int | None = None) -> list[Event]:
        """Events after ``last_id``, oldest first, at most ``limit``.

        When ``last_id`` is older than the buffer (events were dropped) or
        newer than anything given out (another master daemon), the list
        starts with a gap event whose id is the one before the first event
        returned; a reader that stores it resumes correctly.
        """
        first = self.first_id
        if first - 1 <= last_id <= self.last_id:
            start = last_id - first + 1
            after = len(self._events) - start
            if after <= start:
                # a reader near the head (the usual one): walk from the newest
                # end, so the cost is the events returned, not the buffer's size
                tail = list(itertools.islice(reversed(self._events), after))
                tail.reverse()
                return tail if limit is None else tail[:limit]
            return list(itertools.islice(self._events, start,
                                         None if limit is None else start + limit))
        gap = make_gap(last_id, first - 1, now,
                       missed=first - 1 - last_id if last_id < first else None,
                       reason="not in the buffer")
        rest = None if limit is None else max(0, limit - 1)
        return [gap, *itertools.islice(self._events, 0, rest)]


def make_gap(after: int, resume: int, now: float, *, missed: int | None,
             reason: str) -> Event:
    """A gap event: the reader asked for events after ``after``, but the
    next one it can get is ``resume + 1`` (the gap's own id is ``resume``,
    so a reader storing it resumes right); ``missed`` events were lost
    (None: unknown)."""
    return Event(max(resume, 0), EV_GAP, now, data=MappingProxyType(
        {"after": after, "missed": missed, "reason": reason}))


# --- push subscriptions ---------------------------------------------------------

class Subscription:
    """A bounded queue of events for one reader, filled by the bus.

    Made by :meth:`EventBus.subscribe`.  The bus never waits for it: when
    ``maxlen`` events are queued and another matching one comes, the
    subscription *ends* (nothing more is queued, the bus counts it in
    :attr:`EventBus.dropped` and logs it) and :meth:`take` gives the
    queued events and then a gap event; resume with
    :meth:`EventBus.since` from the last id taken.
    """

    def __init__(self, bus: EventBus, flt: EventFilter, maxlen: int) -> None:
        self._bus = bus
        self.filter = flt
        self.maxlen = maxlen
        self._queue: collections.deque[Event] = collections.deque()
        self.overflowed = False
        self.closed = False
        self._gap: Event | None = None

    def _offer(self, event: Event) -> bool:
        """(bus lock held) Queue ``event``; False when this overflowed it."""
        if len(self._queue) >= self.maxlen:
            self.overflowed = True
            last = self._queue[-1].id if self._queue else event.id - 1
            self._gap = make_gap(last, event.id - 1, event.time, missed=None,
                                 reason="slow reader")
            return False
        self._queue.append(event)
        return True

    def pending(self) -> int:
        """How many events are queued."""
        with self._bus.lock:
            return len(self._queue)

    def take(self, timeout: float = 0.0) -> list[Event]:
        """The queued events (waits up to ``timeout`` for one); after an
        overflow, the queued ones and then the gap event (once), after
        which the subscription is closed."""
        with self._bus.lock:
            if not self._queue and not self.overflowed and not self.closed and timeout > 0:
                self._bus.changed.wait_for(
                    lambda: bool(self._queue) or self.overflowed or self.closed, timeout)
            events = list(self._queue)
            self._queue.clear()
            if self.overflowed and self._gap is not None:
                events.append(self._gap)
                self._gap = None
                self.closed = True
            return events

    def close(self) -> None:
        """Stop receiving events."""
        self._bus.unsubscribe(self)


# --- the bus ------------------------------------------------------------------

class EventBus:
    """Publish events once; readers resume from the buffer or subscribe.

    ``capacity``: events kept for :meth:`since`/:meth:`wait`;
    ``last_id``: the id before the first event (masterd:
    :func:`initial_event_id`); ``clock``: wall time of events;
    ``monotonic``: for timeouts.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, last_id: int = 0,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self._buffer = EventBuffer(capacity, last_id=last_id)
        self._subs: list[Subscription] = []
        self._clock = clock
        self._mono = monotonic
        self._stopping = False
        #: subscriptions ended because they overflowed
        self.dropped = 0

    @property
    def last_id(self) -> int:
        with self.lock:
            return self._buffer.last_id

    def publish(self, ev_type: str, *, job_id: int | None = None, instance: str | None = None,
                node: str | None = None, data: Mapping[str, Any] | None = None) -> Event:
        """Add an event (id and time given here); never blocks on readers."""
        if ev_type not in EVENT_TYPES:
            raise errors.ProgrammerError(f"Unknown event type {ev_type!r}")
        frozen = _EMPTY if not data else MappingProxyType(dict(data))
        with self.lock:
            event = Event(self._buffer.last_id + 1, ev_type, self._clock(), job_id, instance,
                          node, frozen)
            dropped = self._add(event)
        self._report(dropped, event)
        return event

    def mirror(self, event: Event) -> None:
        """Add an event that already has its id (a relay of another bus:
        e.g. RAPI's copy of the master's stream).  Ids must only grow; a
        jump (a gap upstream, a master restart) is kept as it is."""
        with self.lock:
            if event.id <= self._buffer.last_id:
                return
            if event.id != self._buffer.last_id + 1:
                self._buffer = EventBuffer(self._buffer.capacity, last_id=event.id - 1)
            dropped = self._add(event)
        self._report(dropped, event)

    def _add(self, event: Event) -> list[Subscription]:
        """(lock held) Buffer ``event``, offer it to the subscriptions;
        returns those that overflowed (now ended)."""
        self._buffer.append(event)
        dropped = []
        if self._subs:
            for sub in list(self._subs):
                if sub.filter(event) and not sub._offer(event):
                    self._subs.remove(sub)
                    self.dropped += 1
                    dropped.append(sub)
        self.changed.notify_all()
        return dropped

    @staticmethod
    def _report(dropped: list[Subscription], event: Event) -> None:
        for sub in dropped:   # logged outside the lock: the publisher may hold others
            logger.warning("Event subscriber fell %d events behind; dropped it at event %d"
                           " (it resumes from the buffer)", sub.maxlen, event.id)

    def since(self, last_id: int | None, flt: EventFilter = _ALL,
              limit: int | None = None) -> tuple[int, list[Event]]:
        """``(cursor, events)``: the matching events after ``last_id``.

        ``cursor`` is the id to ask from next time (the newest event
        looked at, matching or not).  ``last_id`` None means "from now".
        """
        with self.lock:
            return self._since(last_id, flt, limit)

    def _since(self, last_id: int | None, flt: EventFilter,
               limit: int | None) -> tuple[int, list[Event]]:
        if last_id is None:
            return self._buffer.last_id, []
        seen = self._buffer.since(last_id, self._clock())
        if flt.matches_all:
            picked = seen if limit is None else seen[:limit]
            return (picked[-1].id if picked else last_id), picked
        picked = []
        cursor = last_id
        for event in seen:
            if limit is not None and len(picked) >= limit:
                break
            cursor = event.id
            if flt(event):
                picked.append(event)
        return cursor, picked

    def wait(self, last_id: int | None, flt: EventFilter = _ALL, timeout: float = 0.0,
             limit: int | None = None) -> tuple[int, list[Event]]:
        """Like :meth:`since`, waiting up to ``timeout`` seconds while there
        is nothing matching; returns at once when there is."""
        deadline = self._mono() + max(0.0, timeout)
        with self.lock:
            cursor, events = self._since(last_id, flt, limit)
            while not events and not self._stopping:
                left = deadline - self._mono()
                if left <= 0:
                    break
                self.changed.wait(left)
                cursor, more = self._since(cursor, flt, limit)
                events = more
            return cursor, events

    def subscribe(self, flt: EventFilter = _ALL,
                  maxlen: int = DEFAULT_QUEUE_LEN) -> Subscription:
        """A push subscription for events published from now on."""
        if maxlen < 1:
            raise errors.ProgrammerError("A subscription needs room for at least one event")
        sub = Subscription(self, flt, maxlen)
        with self.lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            if sub in self._subs:
                self._subs.remove(sub)
            sub.closed = True
            self.changed.notify_all()

    @property
    def subscribers(self) -> int:
        with self.lock:
            return len(self._subs)

    def stop(self) -> None:
        """Wake every waiter (shutdown): :meth:`wait` returns what it has."""
        with self.lock:
            self._stopping = True
            self.changed.notify_all()


# --- Server-Sent Events ---------------------------------------------------------

_LINE_BREAKS = ("\r\n", "\r", "\n")


def _one_line(name: str, value: str) -> str:
    if any(c in value for c in "\r\n\0"):
        raise errors.ProgrammerError(f"SSE {name} must be one line without NUL: {value!r}")
    return value


def encode_sse(data: str, *, event_id: str | int | None = None, event: str | None = None,
               retry_ms: int | None = None) -> bytes:
    """One SSE message: ``id:``, ``event:``, ``retry:`` and one ``data:``
    line per line of ``data``, then a blank line (UTF-8)."""
    lines = []
    if event_id is not None:
        lines.append("id: " + _one_line("id", str(event_id)))
    if event is not None:
        lines.append("event: " + _one_line("event", event))
    if retry_ms is not None:
        lines.append(f"retry: {int(retry_ms)}")
    for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        lines.append("data: " + line if line else "data:")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_sse_event(event: Event) -> bytes:
    """An :class:`Event` as an SSE message (``data`` is its JSON wire form)."""
    return encode_sse(serializer.dumps(event_to_dict(event)), event_id=event.id,
                      event=event.type)


def encode_sse_comment(text: str = "") -> bytes:
    """A comment (e.g. a keep-alive); readers ignore it."""
    return "".join(f":{' ' if line else ''}{line}\n"
                   for line in (text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
                   ).encode("utf-8")


def parse_sse(raw: bytes) -> list[dict[str, str]]:
    """Split an SSE byte stream into messages ``{"id"?, "event"?, "retry"?,
    "data"}`` as a browser would (comments skipped, an unfinished last
    message left out); for tests and clients."""
    messages: list[dict[str, str]] = []
    current: dict[str, str] = {}
    data: list[str] = []
    text = raw.decode("utf-8")
    for sep in _LINE_BREAKS[:2]:
        text = text.replace(sep, "\n")
    lines = text.split("\n")
    for line in lines[:-1]:       # the last piece has no line end yet
        if not line:
            if data or current:
                messages.append({**current, "data": "\n".join(data)})
            current, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name in ("id", "event", "retry"):
            current[name] = value
    return messages
