"""ganeti.events: buffer and resume, gaps, slow subscribers, filters, SSE bytes."""

from __future__ import annotations

import threading

import pytest

from ganeti import errors, events, serializer
from ganeti.events import EventBus, EventFilter


def _bus(capacity: int = 8, last_id: int = 0) -> EventBus:
    return EventBus(capacity, last_id=last_id, clock=lambda: 1234.5)


def _publish_jobs(bus: EventBus, count: int, job_id: int = 1) -> list[events.Event]:
    return [bus.publish(events.EV_JOB_LOG, job_id=job_id, data={"serial": i + 1})
            for i in range(count)]


# -- records and buffer ----------------------------------------------------------

def test_ids_follow_the_start_id_and_time_comes_from_the_clock() -> None:
    bus = _bus(last_id=5000)
    first, second = _publish_jobs(bus, 2)
    assert (first.id, second.id, first.time) == (5001, 5002, 1234.5)
    assert bus.last_id == 5002


def test_initial_id_is_wall_clock_microseconds() -> None:
    assert events.initial_event_id(lambda: 1700000000.25) == 1700000000250000


def test_unknown_type_is_a_programmer_error() -> None:
    with pytest.raises(errors.ProgrammerError):
        _bus().publish("job.exploded")


def test_since_resumes_after_an_id_in_the_buffer() -> None:
    bus = _bus()
    published = _publish_jobs(bus, 5)
    cursor, got = bus.since(2)
    assert [e.id for e in got] == [3, 4, 5]
    assert cursor == 5
    assert bus.since(5) == (5, [])
    assert bus.since(0)[1] == published


@pytest.mark.parametrize("after", [0, 1, 3, 5, 8, 12, 19, 20])
def test_since_is_the_same_from_either_end_of_the_buffer(after) -> None:
    bus = _bus(capacity=32, last_id=100)
    published = _publish_jobs(bus, 20)              # ids 101-120
    for limit in (None, 1, 4, 30):
        cursor, got = bus.since(100 + after, limit=limit)
        want = published[after:] if limit is None else published[after:after + limit]
        assert got == want
        assert cursor == (want[-1].id if want else 100 + after)


def test_since_none_means_from_now() -> None:
    bus = _bus()
    _publish_jobs(bus, 3)
    assert bus.since(None) == (3, [])


def test_since_with_a_limit_returns_a_cursor_to_go_on_from() -> None:
    bus = _bus()
    _publish_jobs(bus, 5)
    cursor, got = bus.since(0, limit=2)
    assert ([e.id for e in got], cursor) == ([1, 2], 2)
    assert [e.id for e in bus.since(cursor)[1]] == [3, 4, 5]


def test_an_id_that_fell_out_of_the_buffer_gives_a_gap_first() -> None:
    bus = _bus(capacity=4)
    _publish_jobs(bus, 10)                  # 7..10 kept
    cursor, got = bus.since(2)
    gap, *rest = got
    assert gap.type == events.EV_GAP
    assert gap.id == 6                      # resuming from the gap's id loses nothing more
    assert dict(gap.data) == {"after": 2, "missed": 4, "reason": "not in the buffer"}
    assert [e.id for e in rest] == [7, 8, 9, 10]
    assert cursor == 10


def test_the_oldest_kept_id_minus_one_is_still_no_gap() -> None:
    bus = _bus(capacity=4)
    _publish_jobs(bus, 10)
    assert [e.id for e in bus.since(6)[1]] == [7, 8, 9, 10]


def test_an_id_from_another_master_run_gives_a_gap() -> None:
    bus = _bus(last_id=100)
    _publish_jobs(bus, 2)
    gap, *rest = bus.since(5000)[1]
    assert gap.type == events.EV_GAP and gap.data["missed"] is None
    assert [e.id for e in rest] == [101, 102]


def test_the_buffer_refuses_an_id_out_of_order() -> None:
    buf = events.EventBuffer(4)
    with pytest.raises(errors.ProgrammerError):
        buf.append(events.Event(5, events.EV_JOB_LOG, 0.0))


# -- waiting ---------------------------------------------------------------------

def test_wait_returns_at_once_when_events_exist() -> None:
    bus = _bus()
    _publish_jobs(bus, 2)
    assert [e.id for e in bus.wait(0, timeout=3600)[1]] == [1, 2]


def test_wait_times_out_with_no_events_and_the_cursor_unchanged() -> None:
    readings = iter([0.0, 100.0, 100.0])
    bus = EventBus(4, monotonic=lambda: next(readings))
    assert bus.wait(0, timeout=5) == (0, [])


def test_wait_wakes_when_a_matching_event_is_published() -> None:
    bus = _bus()
    got: list[tuple[int, list[events.Event]]] = []
    waiter = threading.Thread(target=lambda: got.append(
        bus.wait(None, EventFilter(job_ids=[7]), timeout=30)))
    waiter.start()
    for _ in range(200):                     # until the waiter waits on the condition
        if bus.changed._waiters:  # type: ignore[attr-defined]
            break
        threading.Event().wait(0.005)
    _publish_jobs(bus, 3, job_id=1)          # not for job 7: keeps waiting
    bus.publish(events.EV_JOB_STATUS, job_id=7, data={"status": "running"})
    waiter.join(30)
    assert not waiter.is_alive()
    cursor, matched = got[0]
    assert [e.job_id for e in matched] == [7]
    assert cursor == 4


def test_stop_wakes_waiters() -> None:
    bus = _bus()
    done = threading.Event()

    def wait() -> None:
        bus.wait(None, timeout=3600)
        done.set()

    thread = threading.Thread(target=wait)
    thread.start()
    bus.stop()
    thread.join(30)
    assert done.is_set()


# -- push subscriptions ------------------------------------------------------------

def test_a_subscriber_gets_events_published_after_it_subscribed() -> None:
    bus = _bus()
    _publish_jobs(bus, 2)
    sub = bus.subscribe(maxlen=10)
    _publish_jobs(bus, 3)
    assert [e.id for e in sub.take()] == [3, 4, 5]
    assert sub.take() == []


def test_a_slow_subscriber_is_dropped_with_a_gap_and_never_blocks() -> None:
    bus = _bus(capacity=100)
    sub = bus.subscribe(maxlen=3)
    fast = bus.subscribe(maxlen=100)
    _publish_jobs(bus, 10)                   # returns: the publisher never waits
    assert bus.dropped == 1
    assert bus.subscribers == 1
    taken = sub.take()
    assert [e.id for e in taken[:3]] == [1, 2, 3]
    gap = taken[3]
    assert gap.type == events.EV_GAP and gap.id == 3 and gap.data["reason"] == "slow reader"
    assert sub.closed and sub.take() == []
    # the reader resumes from the buffer with the gap's id
    assert [e.id for e in bus.since(gap.id)[1]] == list(range(4, 11))
    assert len(fast.take()) == 10


def test_a_filtered_subscriber_only_counts_matching_events() -> None:
    bus = _bus(capacity=100)
    sub = bus.subscribe(EventFilter(job_ids=[2]), maxlen=2)
    _publish_jobs(bus, 20, job_id=1)
    _publish_jobs(bus, 2, job_id=2)
    assert bus.dropped == 0
    assert [e.job_id for e in sub.take()] == [2, 2]


def test_unsubscribe_stops_delivery() -> None:
    bus = _bus()
    sub = bus.subscribe()
    sub.close()
    _publish_jobs(bus, 2)
    assert sub.take() == [] and sub.closed and bus.subscribers == 0


# -- filters -----------------------------------------------------------------------

def _mixed_bus() -> EventBus:
    bus = _bus(capacity=100)
    bus.publish(events.EV_JOB_SUBMITTED, job_id=1, data={"status": "queued"})
    bus.publish(events.EV_JOB_STATUS, job_id=2, data={"status": "running"})
    bus.publish(events.EV_INSTANCE_STATE, instance="inst1", data={"status": "up"})
    bus.publish(events.EV_NODE_ROLE, node="node2", data={"role": "drained"})
    bus.publish(events.EV_JOB_FINISHED, job_id=1, data={"status": "success"})
    return bus


@pytest.mark.parametrize("flt, expected", [
    (EventFilter(), [1, 2, 3, 4, 5]),
    (EventFilter(job_ids=[1]), [1, 5]),
    (EventFilter(job_ids=["2"]), [2]),
    (EventFilter(qfilter=["==", "type", "node.role"]), [4]),
    (EventFilter(qfilter=["=~", "type", "^job\\."]), [1, 2, 5]),
    (EventFilter(qfilter=["==", "status", "success"]), [5]),
    (EventFilter(qfilter=["?", "instance"]), [3]),
    (EventFilter(qfilter=["==", "node", "node2"]), [4]),
    (EventFilter(job_ids=[1], qfilter=["!=", "type", "job.submitted"]), [5]),
], ids=["all", "jobs", "job-id-string", "type", "regex", "status", "has-instance", "node",
        "jobs-and-filter"])
def test_filters(flt: EventFilter, expected: list[int]) -> None:
    assert [e.id for e in _mixed_bus().since(0, flt)[1]] == expected


def test_a_filtered_read_moves_the_cursor_past_non_matching_events() -> None:
    assert _mixed_bus().since(0, EventFilter(job_ids=[2])) == (5, [_mixed_bus().since(1)[1][0]])


def test_gaps_pass_every_filter() -> None:
    bus = _bus(capacity=2)
    _publish_jobs(bus, 5, job_id=1)
    got = bus.since(0, EventFilter(job_ids=[99]))[1]
    assert [e.type for e in got] == [events.EV_GAP]


@pytest.mark.parametrize("raw", [
    {"jobs": "1"}, {"jobs": [0]}, {"jobs": [True]}, {"what": 1}, [1], {"filter": ["==", "nope", 1]},
    {"filter": ["==", "id", "text"]},
], ids=["jobs-not-list", "zero-id", "bool-id", "unknown-key", "not-object", "unknown-field",
        "wrong-kind"])
def test_bad_wire_filters_are_refused(raw: object) -> None:
    with pytest.raises((errors.ParameterError, errors.QueryFilterParseError)):
        EventFilter.from_wire(raw)


def test_wire_filter() -> None:
    flt = EventFilter.from_wire({"jobs": [1, "2"], "filter": ["==", "type", "job.log"]})
    assert flt.job_ids == frozenset([1, 2]) and not flt.matches_all
    assert EventFilter.from_wire(None).matches_all


# -- wire form and mirroring ---------------------------------------------------------

def test_wire_form_round_trips_through_json() -> None:
    event = _mixed_bus().since(0)[1][3]
    again = events.event_from_dict(serializer.loads(serializer.dumps(events.event_to_dict(event))))
    assert again == event and dict(again.data) == {"role": "drained"}


@pytest.mark.parametrize("raw", [
    None, {"id": -1, "type": "x", "time": 0}, {"id": 1, "type": "", "time": 0},
    {"id": 1, "type": "x", "time": "now"}, {"id": 1, "type": "x", "time": 0, "job_id": "1"},
    {"id": 1, "type": "x", "time": 0, "node": 3}, {"id": 1, "type": "x", "time": 0, "data": []},
])
def test_bad_wire_events_are_refused(raw: object) -> None:
    with pytest.raises(errors.ParameterError):
        events.event_from_dict(raw)


def test_mirror_keeps_upstream_ids_and_skips_old_ones() -> None:
    upstream = _bus(last_id=1000)
    _publish_jobs(upstream, 3)
    relay = EventBus(8)
    sub = relay.subscribe()
    for event in upstream.since(1000)[1] + upstream.since(1001)[1]:
        relay.mirror(event)
    assert [e.id for e in sub.take()] == [1001, 1002, 1003]
    assert relay.last_id == 1003
    assert [e.id for e in relay.since(1001)[1]] == [1002, 1003]


# -- Server-Sent Events ----------------------------------------------------------------

def test_sse_message_bytes() -> None:
    assert events.encode_sse("hello", event_id=7, event="job.log") == (
        b"id: 7\nevent: job.log\ndata: hello\n\n")


def test_sse_multi_line_data_gets_one_data_line_each() -> None:
    assert events.encode_sse("a\nb\r\nc\r\n") == b"data: a\ndata: b\ndata: c\ndata:\n\n"


def test_sse_retry_and_utf8() -> None:
    assert events.encode_sse("\u00e9", retry_ms=3000) == "retry: 3000\ndata: \u00e9\n\n".encode()


def test_sse_id_and_event_must_be_one_line() -> None:
    with pytest.raises(errors.ProgrammerError):
        events.encode_sse("x", event_id="1\n2")
    with pytest.raises(errors.ProgrammerError):
        events.encode_sse("x", event="a\rb")


def test_sse_comment_for_keep_alive() -> None:
    assert events.encode_sse_comment("keep-alive") == b": keep-alive\n"
    assert events.encode_sse_comment() == b":\n"
    assert events.encode_sse_comment("a\nb") == b": a\n: b\n"


def test_sse_event_bytes_carry_the_json_wire_form() -> None:
    event = events.Event(42, events.EV_JOB_STATUS, 1.5, job_id=3, data={"status": "running"})
    raw = events.encode_sse_event(event)
    assert raw.startswith(b"id: 42\nevent: job.status\ndata: {") and raw.endswith(b"}\n\n")
    assert raw.count(b"\n") == 4
    (message,) = events.parse_sse(raw)
    assert message["id"] == "42" and message["event"] == "job.status"
    assert serializer.loads(message["data"]) == events.event_to_dict(event)


def test_parse_sse_skips_comments_and_keeps_an_unfinished_message_out() -> None:
    raw = (events.encode_sse_comment("hi") + events.encode_sse("a\nb", event_id=1)
           + b"id: 2\ndata: partial")
    assert events.parse_sse(raw) == [{"id": "1", "data": "a\nb"}]
