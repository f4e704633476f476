"""``GET /2/events``: the cluster's event stream as Server-Sent Events.

Two parts, both without sockets of their own (doc/rapi.md, "Events"):

* :class:`EventRelay` keeps a local :class:`ganeti.events.EventBus` (a
  bounded buffer) a copy of the master's stream: one LUXI long poll
  (``WaitForEvents``) after another, each answer :meth:`~EventBus.mirror`-ed.
  It is the daemon's only reader of the master's events, however many
  HTTP clients there are.
* :func:`serve_events` feeds one HTTP client: a bounded subscription on the
  local bus, the events after ``Last-Event-ID`` from the local buffer
  first, then each new event as it comes, and a keep-alive comment when
  nothing was sent for :data:`KEEPALIVE` seconds.  A client too slow for
  its queue never slows the relay: the bus ends the subscription (a
  ``slow reader`` gap) and the client carries on from the local buffer; a
  client that fell behind the buffer gets a ``not in the buffer`` gap
  event (doc/protocols/events.md, "Resume and gaps").

:func:`open_stream` is the resource row's reader: it checks the query
parameters and returns a :class:`StreamRequest` for the server to serve.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ganeti import errors, events, serializer
from ganeti.rapi import uri

__all__ = ["KEEPALIVE", "RELAY_POLL", "StreamRequest", "EventRelay", "open_stream",
           "parse_event_id", "serve_events"]

logger = logging.getLogger(__name__)

#: seconds without a message after which a keep-alive comment is sent
KEEPALIVE = 15.0
#: how long one relay long poll waits at the master (seconds)
RELAY_POLL = 60.0
#: the relay's wait after a failed poll, doubled up to the maximum (seconds)
RELAY_RETRY = (0.5, 10.0)

_OPENING = events.encode_sse_comment("ganeti events") + b"\n"
_KEEPALIVE = events.encode_sse_comment("keep-alive") + b"\n"


def _bad(msg: str) -> errors.HttpError:
    return errors.HttpError(msg, 400)


def parse_event_id(text: str | None, what: str) -> int | None:
    """An event id from a header or parameter (None or empty: none).

    Raises :class:`errors.HttpError` 400 for anything but a decimal number.
    """
    if text is None or not text.strip():
        return None
    return _number(text.strip(), what)


def _number(text: str, what: str) -> int:
    """A number of ASCII digits with a bounded length (:func:`ganeti.rapi.uri.parse_id`);
    a 400 for anything else, however large."""
    try:
        return uri.parse_id(text, what)
    except errors.HttpError as exc:
        raise _bad(str(exc)) from None


@dataclass(frozen=True)
class StreamRequest:
    """A checked ``GET /2/events``: which events, and after which id."""

    flt: events.EventFilter
    last_id: int | None = None

    def resumed(self, last_event_id: str | None) -> StreamRequest:
        """With the ``Last-Event-ID`` header applied (it wins over ``?last_id=``:
        a browser reconnecting sends it with the first URL's parameters)."""
        header = parse_event_id(last_event_id, "Last-Event-ID header")
        return self if header is None else replace(self, last_id=header)


class _QueryLike(Protocol):
    def qstr(self, name: str, default: str | None = None) -> str | None: ...


def open_stream(ctx: _QueryLike) -> StreamRequest:
    """The reader of the ``/2/events`` row: ``jobs=ID,...``, ``filter=``
    (a query2 filter as JSON) and ``last_id=``; a bad one is a 400."""
    jobs_text = ctx.qstr("jobs")
    job_ids = None
    if jobs_text is not None:
        job_ids = [str(_number(j.strip(), "job id in 'jobs'")) for j in jobs_text.split(",")]
    qfilter = None
    filter_text = ctx.qstr("filter")
    if filter_text:
        try:
            qfilter = serializer.loads(filter_text, valid_unicode=True)
        except errors.SerializationError as exc:
            raise _bad(f"Invalid JSON in 'filter': {exc}") from exc
    try:
        flt = events.EventFilter(job_ids, qfilter)
    except (errors.ParameterError, errors.QueryFilterParseError) as exc:
        raise _bad(str(exc)) from exc
    return StreamRequest(flt, parse_event_id(ctx.qstr("last_id"), "'last_id'"))


# --- the relay ------------------------------------------------------------------

class _EventSource(Protocol):
    def WaitForEvents(self, last_id: int | None, event_filter: Any = None,
                      timeout: float = ...) -> dict[str, Any]: ...

    def close(self) -> None: ...


class EventRelay:
    """Mirror the master's events into ``bus``, one long poll at a time.

    ``connect`` makes a LUXI client (a new one after a failure).  The first
    poll asks from id 0, so the local buffer starts with what the master
    still holds (its "not in the buffer" gap for that first answer is
    dropped: nothing was missed by anyone yet); later polls ask from the
    last id seen, so a master restart or a relay that fell behind the
    master's buffer comes through as the master's gap event.
    """

    def __init__(self, bus: events.EventBus, connect: Callable[[], _EventSource], *,
                 poll: float = RELAY_POLL) -> None:
        self.bus = bus
        self._connect = connect
        self._poll = poll
        self.cursor = 0
        self._primed = False
        #: polls that failed (the relay waits and tries again)
        self.failures = 0

    def step(self, client: _EventSource, timeout: float | None = None) -> int:
        """One poll: mirror its events, move the cursor; returns how many."""
        answer = client.WaitForEvents(self.cursor, None,
                                      self._poll if timeout is None else timeout)
        if not isinstance(answer, dict) or not isinstance(answer.get("last_id"), int):
            raise errors.ProtocolError(f"Unexpected WaitForEvents answer: {answer!r:.80}")
        got = [events.event_from_dict(raw) for raw in answer.get("events") or []]
        if not self._primed and got and got[0].type == events.EV_GAP:
            got = got[1:]
        self._primed = True
        for event in got:
            self.bus.mirror(event)
        self.cursor = answer["last_id"]
        return len(got)

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; failures are logged and retried later."""
        client: _EventSource | None = None
        delay = RELAY_RETRY[0]
        while not stop.is_set():
            try:
                if client is None:
                    client = self._connect()
                self.step(client)
                delay = RELAY_RETRY[0]
            except errors.GanetiError as exc:
                self.failures += 1
                log = logger.warning if self.failures == 1 else logger.debug
                log("Event relay: cannot read the master's events (%s); retrying", exc)
                if client is not None:
                    client.close()
                    client = None
                stop.wait(delay)
                delay = min(delay * 2, RELAY_RETRY[1])
        if client is not None:
            client.close()


# --- one client -----------------------------------------------------------------

#: seconds between two checks that a stream's client may still read events
RECHECK = 1.0


def serve_events(bus: events.EventBus, request: StreamRequest, write: Callable[[bytes], Any],
                 *, begin: Callable[[], None] = lambda: None, keepalive: float = KEEPALIVE,
                 stop: threading.Event | None = None,
                 maxlen: int = events.DEFAULT_QUEUE_LEN,
                 monotonic: Callable[[], float] = time.monotonic,
                 allowed: Callable[[], bool] | None = None,
                 recheck: float = RECHECK) -> int:
    """Stream ``bus``'s events to one client until ``stop`` or a write fails.

    ``allowed`` (when given) is asked again every ``recheck`` seconds
    whether the client's credentials still hold (a revoked token, a
    deleted user, an ended session); the stream ends, before sending
    anything more, once it answers False (doc/rapi.md, "Events").

    Subscribes first, then calls ``begin`` (the server sends its response
    headers: from then on no event can be missed), sends the events after
    ``request.last_id`` from the buffer, then each new one; an event is
    never sent twice.  ``write`` raising (the client went away, or did not
    read for the socket's timeout) ends the stream with that exception.
    Returns how many events were sent.
    """
    flt = request.flt
    sub = bus.subscribe(flt, maxlen)
    cursor = request.last_id
    sent = 0
    try:
        backlog: list[events.Event] = []
        if cursor is not None:
            cursor, backlog = bus.since(cursor, flt)
        begin()
        write(_OPENING)
        for event in backlog:
            write(events.encode_sse_event(event))
        sent += len(backlog)
        last_write = monotonic()
        next_check = last_write + recheck
        while stop is None or not stop.is_set():
            wake = last_write + keepalive
            if allowed is not None:
                wake = min(wake, next_check)
            taken = sub.take(timeout=max(0.0, wake - monotonic()))
            if allowed is not None and monotonic() >= next_check:
                if not allowed():
                    logger.info("Event stream ended: the client's credentials no longer hold")
                    break
                next_check = monotonic() + recheck
            if sub.overflowed and taken and taken[-1].type == events.EV_GAP:
                gap = taken.pop()
            else:
                gap = None
            for event in taken:
                if cursor is not None and event.id <= cursor:
                    continue            # already sent from the buffer
                write(events.encode_sse_event(event))
                cursor = event.id
                sent += 1
                last_write = monotonic()
            if gap is not None:
                # too slow for the queue: carry on from the buffer (a gap
                # event of its own if the buffer no longer has our events)
                logger.info("Event stream client fell %d events behind; resuming from"
                            " the buffer after event %s", sub.maxlen, cursor)
                sub.close()
                sub = bus.subscribe(flt, maxlen)
                cursor, backlog = bus.since(gap.id if cursor is None else cursor, flt)
                for event in backlog:
                    write(events.encode_sse_event(event))
                sent += len(backlog)
                last_write = monotonic()
            elif sub.closed:
                break
            if monotonic() - last_write >= keepalive:
                write(_KEEPALIVE)
                last_write = monotonic()
    finally:
        sub.close()
    return sent
