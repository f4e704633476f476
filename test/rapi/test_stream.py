"""``GET /2/events`` without sockets: parameters, one client's stream, the relay."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from ganeti import errors, events
from ganeti.rapi import resources, stream


class _Q:
    def __init__(self, **params: str) -> None:
        self.params = params

    def qstr(self, name: str, default: str | None = None) -> str | None:
        return self.params.get(name, default)


def _ev(bus: events.EventBus, job_id: int = 1, ev_type: str = events.EV_JOB_STATUS,
        **data: Any) -> events.Event:
    return bus.publish(ev_type, job_id=job_id, data=data or {"status": "running"})


def _parsed(out: list[bytes]) -> list[dict[str, str]]:
    return events.parse_sse(b"".join(out))


# --- parameters -----------------------------------------------------------------

def test_the_row_is_a_read_in_the_table() -> None:
    route, args = resources.match("GET", "/2/events")
    assert route.read is stream.open_stream and not route.needs_write and args == {}


def test_jobs_filter_and_last_id_narrow_the_stream() -> None:
    req = stream.open_stream(_Q(jobs="3,4", last_id="17",
                                filter='["==", "type", "job.finished"]'))
    assert req.last_id == 17 and req.flt.job_ids == {3, 4}
    bus = events.EventBus()
    finished = bus.publish(events.EV_JOB_FINISHED, job_id=3, data={"status": "success"})
    assert req.flt(finished)
    assert not req.flt(_ev(bus, job_id=3))                  # not job.finished
    assert not req.flt(bus.publish(events.EV_JOB_FINISHED, job_id=5))
    assert stream.open_stream(_Q()).flt.matches_all


@pytest.mark.parametrize("params", [
    {"jobs": "1,x"}, {"jobs": ""}, {"jobs": "1,,2"}, {"jobs": "0"},
    {"filter": "[not json"}, {"filter": '["==", "nosuchfield", 1]'}, {"filter": "42"},
    {"last_id": "-1"}, {"last_id": "1e3"},
])
def test_bad_parameters_are_a_400(params: dict[str, str]) -> None:
    with pytest.raises(errors.HttpError) as info:
        stream.open_stream(_Q(**params))
    assert info.value.status == 400


def test_the_last_event_id_header_wins_over_the_parameter() -> None:
    req = stream.open_stream(_Q(last_id="5"))
    assert req.resumed(None).last_id == 5 and req.resumed("").last_id == 5
    assert req.resumed(" 9 ").last_id == 9
    with pytest.raises(errors.HttpError):
        req.resumed("abc")


# --- one client -----------------------------------------------------------------

class _Writer:
    """Collects what is written; ends the stream (stop) after ``until`` events."""

    def __init__(self, stop: threading.Event, until: int, keepalives: int = 0) -> None:
        self.out: list[bytes] = []
        self.stop = stop
        self.until = until
        self.keepalives = keepalives

    def __call__(self, data: bytes) -> None:
        self.out.append(data)
        msgs = _parsed(self.out)
        alive = sum(1 for d in self.out if d.startswith(b": keep-alive"))
        if len(msgs) >= self.until and alive >= self.keepalives:
            self.stop.set()


def _serve(bus: events.EventBus, req: stream.StreamRequest, writer: _Writer, **kw: Any) -> int:
    return stream.serve_events(bus, req, writer, stop=writer.stop, keepalive=kw.pop(
        "keepalive", 3600.0), **kw)


def test_resume_sends_the_rest_from_the_buffer_then_new_events() -> None:
    bus = events.EventBus()
    first = [_ev(bus, data={"n": i}) for i in range(4)]
    writer = _Writer(threading.Event(), until=4)
    sent = _serve(bus, stream.StreamRequest(events.EventFilter(), first[1].id), writer,
                  begin=lambda: [_ev(bus, data={"n": 10}), _ev(bus, data={"n": 11})])
    msgs = _parsed(writer.out)
    assert [int(m["id"]) for m in msgs] == [first[2].id, first[3].id, first[3].id + 1,
                                           first[3].id + 2]
    assert [m["event"] for m in msgs] == [events.EV_JOB_STATUS] * 4
    assert sent == 4 and writer.out[0].startswith(b": ganeti events")
    assert bus.subscribers == 0                 # the subscription is gone afterwards


def test_an_event_both_in_the_buffer_and_the_queue_is_sent_once() -> None:
    class Racy(events.EventBus):
        def since(self, *args: Any, **kw: Any) -> Any:   # published after subscribing
            _ev(self, data={"n": "race"})
            return super().since(*args, **kw)

    bus = Racy()
    start = _ev(bus)
    writer = _Writer(threading.Event(), until=2)
    _serve(bus, stream.StreamRequest(events.EventFilter(), start.id), writer,
           begin=lambda: _ev(bus, data={"n": "after"}))
    ids = [int(m["id"]) for m in _parsed(writer.out)]
    assert ids == [start.id + 1, start.id + 2]


def test_from_now_without_an_id_and_filtered() -> None:
    bus = events.EventBus()
    _ev(bus, job_id=1)
    writer = _Writer(threading.Event(), until=2)
    req = stream.open_stream(_Q(jobs="2"))
    _serve(bus, req, writer, begin=lambda: [_ev(bus, job_id=1), _ev(bus, job_id=2),
                                            _ev(bus, job_id=1), _ev(bus, job_id=2)])
    msgs = _parsed(writer.out)
    assert [json.loads(m["data"])["job_id"] for m in msgs] == [2, 2]


def test_a_slow_client_resumes_from_the_buffer_without_losing_events() -> None:
    bus = events.EventBus(capacity=100)
    writer = _Writer(threading.Event(), until=10)
    _serve(bus, stream.StreamRequest(events.EventFilter()), writer, maxlen=2,
           begin=lambda: [_ev(bus, data={"n": i}) for i in range(10)])
    msgs = _parsed(writer.out)
    assert [m["event"] for m in msgs] == [events.EV_JOB_STATUS] * 10
    ids = [int(m["id"]) for m in msgs]
    assert ids == list(range(ids[0], ids[0] + 10))
    assert bus.dropped == 1                       # its queue overflowed once


def test_a_client_behind_the_buffer_gets_a_gap_then_the_rest() -> None:
    bus = events.EventBus(capacity=3)
    writer = _Writer(threading.Event(), until=5)
    published: list[events.Event] = []
    _serve(bus, stream.StreamRequest(events.EventFilter()), writer, maxlen=1,
           begin=lambda: published.extend(_ev(bus, data={"n": i}) for i in range(6)))
    msgs = _parsed(writer.out)
    # it got the first event, then its queue overflowed and the buffer holds the last 3
    assert [m["event"] for m in msgs] == [events.EV_JOB_STATUS, "gap"] + \
        [events.EV_JOB_STATUS] * 3
    assert [int(m["id"]) for m in msgs[2:]] == [e.id for e in published[3:]]
    gap = json.loads(msgs[1]["data"])
    assert gap["data"] == {"after": published[0].id, "missed": 2,
                           "reason": "not in the buffer"}


def test_a_keepalive_comment_when_nothing_happens() -> None:
    bus = events.EventBus()
    writer = _Writer(threading.Event(), until=0, keepalives=2)
    _serve(bus, stream.StreamRequest(events.EventFilter()), writer, keepalive=0.0)
    assert writer.out[1:] == [b": keep-alive\n\n", b": keep-alive\n\n"]


def test_the_stream_ends_once_the_credentials_no_longer_hold() -> None:
    bus = events.EventBus()
    clock = [0.0]
    answers = [True, True, False]
    asked: list[float] = []

    def allowed() -> bool:
        asked.append(len(out))
        return answers.pop(0)

    def write(data: bytes) -> None:
        out.append(data)
        clock[0] += 1.0                 # every write takes a second on this clock
        if b"event:" in data:
            _ev(bus)                     # and the next event is there at once
    out: list[bytes] = []
    sent = stream.serve_events(bus, stream.StreamRequest(events.EventFilter()), write,
                               begin=lambda: _ev(bus), keepalive=3600.0,
                               monotonic=lambda: clock[0], allowed=allowed, recheck=1.5)
    assert answers == [] and len(asked) == 3
    assert asked[0] < asked[1] < asked[2] == len(out)   # nothing written after the refusal
    assert sent == len(_parsed(out)) == len(out) - 1    # the opening comment, then events
    assert bus.subscribers == 0


def test_a_failing_write_ends_the_stream_and_its_subscription() -> None:
    bus = events.EventBus()

    def write(data: bytes) -> None:
        if b"event:" in data:
            raise BrokenPipeError("gone")

    with pytest.raises(BrokenPipeError):
        stream.serve_events(bus, stream.StreamRequest(events.EventFilter()), write,
                            begin=lambda: _ev(bus))
    assert bus.subscribers == 0
    _ev(bus)                                       # publishing is not affected


# --- the relay ------------------------------------------------------------------

class _Master:
    """A scripted WaitForEvents: each answer, or an exception to raise."""

    def __init__(self, answers: list[Any], stop: threading.Event) -> None:
        self.answers = answers
        self.asked: list[int | None] = []
        self.stop = stop
        self.closed = 0

    def WaitForEvents(self, last_id: int | None, event_filter: Any = None,
                      timeout: float = 0.0) -> dict[str, Any]:
        self.asked.append(last_id)
        answer = self.answers.pop(0)
        if not self.answers:
            self.stop.set()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed += 1


def _wire(ev_id: int, ev_type: str = events.EV_JOB_STATUS, **data: Any) -> dict[str, Any]:
    return events.event_to_dict(events.Event(ev_id, ev_type, 1.0, job_id=1, data=data))


def test_the_relay_mirrors_the_master_and_survives_failures() -> None:
    stop = threading.Event()
    master = _Master([
        {"last_id": 101, "events": [_wire(99, events.EV_GAP, after=0, missed=99,
                                          reason="not in the buffer"),
                                    _wire(100), _wire(101)]},
        errors.ConnectionClosedError("master went away"),
        {"last_id": 101, "events": []},
        {"last_id": 5000, "events": [_wire(4999, events.EV_GAP, after=101, missed=None,
                                            reason="not in the buffer"), _wire(5000)]},
    ], stop)
    bus = events.EventBus()
    seen = bus.subscribe()
    relay = stream.EventRelay(bus, lambda: master)
    relay.run(stop)
    assert master.asked == [0, 101, 101, 101]
    assert relay.cursor == 5000 and relay.failures == 1 and master.closed == 2
    # the first answer's gap is dropped; a later one (a master restart) is passed on
    assert [(e.id, e.type) for e in seen.take()] == [
        (100, events.EV_JOB_STATUS), (101, events.EV_JOB_STATUS),
        (4999, events.EV_GAP), (5000, events.EV_JOB_STATUS)]
    _, tail = bus.since(4998)
    assert [(e.id, e.type) for e in tail] == [(4999, events.EV_GAP), (5000, events.EV_JOB_STATUS)]


def test_the_relay_refuses_a_malformed_answer() -> None:
    relay = stream.EventRelay(events.EventBus(), lambda: None)  # type: ignore[arg-type]
    master = _Master([{"events": []}, {"last_id": 3}], threading.Event())
    with pytest.raises(errors.ProtocolError):
        relay.step(master)
    assert relay.step(master) == 0 and relay.cursor == 3
