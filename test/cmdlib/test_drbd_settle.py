"""drbd.wait_for_sync: a mirror just set up that has not begun its resync is waited for;
its looks come quickly at first, then every SYNC_POLL seconds."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ganeti.cmdlib import drbd

_DEGRADED = {"is_degraded": True, "sync_percent": None, "drbd": {"cstate": "Connected"}}
_SYNCING = {"is_degraded": True, "sync_percent": 50.0, "drbd": {"cstate": "SyncSource"}}
_IN_SYNC = {"is_degraded": False, "sync_percent": None, "drbd": {"cstate": "Connected"}}


def _wait(answers: list[dict[str, Any]], monkeypatch, poll: float | None = 5.0,
          slept: list[float] | None = None) -> tuple[bool, list[str]]:
    now = [0.0]
    warnings: list[str] = []
    seq = iter(answers)
    rpc = SimpleNamespace(call_blockdev_find=lambda node, disk: SimpleNamespace(
        one=lambda *a: dict(next(seq))))
    lu = SimpleNamespace(require_rpc=lambda: rpc, LogWarning=warnings.append)
    monkeypatch.setattr(drbd, "rpc_disk", lambda disk, cfg: {})
    monkeypatch.setattr(drbd, "_report", lambda *a: None)
    disk = SimpleNamespace(dev_type="drbd", iv_name="disk/0", uuid="d0")
    node = SimpleNamespace(name="node1")

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if slept is not None:
            slept.append(seconds)
    ok = drbd.wait_for_sync(lu, node, [disk], lambda msg: None, cfg=None,  # type: ignore[arg-type]
                            clock=lambda: now[0], sleep=sleep, poll=poll)
    return ok, warnings


def test_a_resync_that_begins_late_is_waited_for(monkeypatch) -> None:
    ok, warnings = _wait([_DEGRADED, _DEGRADED, _SYNCING, _IN_SYNC], monkeypatch)
    assert ok and warnings == []


def test_a_mirror_that_never_resyncs_is_reported_after_the_settle_time(monkeypatch) -> None:
    ok, warnings = _wait([_DEGRADED] * 10, monkeypatch)
    assert not ok and warnings == ["Disks not in sync on node1: disk/0 (Connected)"]


def test_the_pauses_double_from_the_first_up_to_the_most() -> None:
    delays = drbd.sync_poll_delays(0.25, 2.0)
    assert [next(delays) for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    fixed = drbd.sync_poll_delays(5.0, 5.0)
    assert [next(fixed) for _ in range(3)] == [5.0, 5.0, 5.0]
    capped = drbd.sync_poll_delays(3.0, 2.0)
    assert [next(capped) for _ in range(2)] == [2.0, 2.0]
    zero = drbd.sync_poll_delays(0.0, 0.0)
    assert [next(zero) for _ in range(2)] == [0.0, 0.0]


def test_a_mirror_that_connects_at_once_is_seen_in_sync_after_the_first_short_pause(
        monkeypatch) -> None:
    """A mirror just reconnected (waiting for its peer) is looked at again after
    SYNC_POLL_FIRST, not a whole SYNC_POLL: the pause every relocation step paid."""
    connecting = {"is_degraded": True, "sync_percent": None,
                  "drbd": {"cstate": "WFConnection"}}
    slept: list[float] = []
    ok, warnings = _wait([connecting, _IN_SYNC], monkeypatch, poll=None, slept=slept)
    assert ok and warnings == []
    assert slept == [drbd.SYNC_POLL_FIRST] and drbd.SYNC_POLL_FIRST < drbd.SYNC_POLL


def test_a_long_resync_is_looked_at_more_rarely_up_to_sync_poll(monkeypatch) -> None:
    answers = [dict(_SYNCING, sync_percent=float(p)) for p in range(10, 90, 10)]
    slept: list[float] = []
    ok, _ = _wait([*answers, _IN_SYNC], monkeypatch, poll=None, slept=slept)
    assert ok
    assert slept == [0.25, 0.5, 1.0] + [drbd.SYNC_POLL] * (len(answers) - 3)


def _state(cstate: str, **kw: Any) -> dict[str, Any]:
    return {"is_degraded": True, "sync_percent": None, "drbd": {"cstate": cstate}, **kw}


#: DRBD's own retry loop towards a peer it has not reached yet (a handshake that
#: timed out under load, then listening again)
_RETRY_LOOP = ["WFConnection", "WFReportParams", "Timeout", "NetworkFailure", "TearDown",
               "Unconnected", "BrokenPipe"]


def test_a_mirror_still_trying_its_peer_after_the_settle_time_is_waited_for(
        monkeypatch) -> None:
    """Not connected yet is not degraded: a connection going round DRBD's retry loop
    for longer than SYNC_SETTLE (which a mirror caught in Unconnected or Timeout was
    given before) is waited for until it connects and syncs."""
    looks = int(drbd.SYNC_SETTLE / 5.0) * 3
    retrying = [_state(_RETRY_LOOP[i % len(_RETRY_LOOP)]) for i in range(looks)]
    ok, warnings = _wait([*retrying, _SYNCING, _IN_SYNC], monkeypatch)
    assert ok and warnings == []


def test_a_mirror_that_never_connects_is_given_up_after_the_stall_time(monkeypatch) -> None:
    """Its connection state changing round the loop is no progress: the stall time
    counts from the first look, not from the last change of state."""
    now = [0.0]
    looks = int(drbd.SYNC_STALL / 5.0) + 10
    answers = iter([_state(_RETRY_LOOP[i % len(_RETRY_LOOP)]) for i in range(looks)])
    warnings: list[str] = []
    rpc = SimpleNamespace(call_blockdev_find=lambda node, disk: SimpleNamespace(
        one=lambda *a: dict(next(answers))))
    lu = SimpleNamespace(require_rpc=lambda: rpc, LogWarning=warnings.append)
    monkeypatch.setattr(drbd, "rpc_disk", lambda disk, cfg: {})
    monkeypatch.setattr(drbd, "_report", lambda *a: None)
    disk = SimpleNamespace(dev_type="drbd", iv_name="disk/0", uuid="d0")

    def sleep(seconds: float) -> None:
        now[0] += seconds
    ok = drbd.wait_for_sync(lu, SimpleNamespace(name="node1"), [disk], lambda msg: None,
                            cfg=None, clock=lambda: now[0], sleep=sleep,  # type: ignore[arg-type]
                            poll=5.0)
    assert not ok
    assert warnings == ["The sync of disk/0 on node1 made no progress for 300s"]
    assert drbd.SYNC_STALL < now[0] <= drbd.SYNC_STALL + 10.0


def test_a_standalone_mirror_is_not_waited_for_past_the_settle_time(monkeypatch) -> None:
    """StandAlone: DRBD gave its peer up (a failed handshake, a split brain) and will
    not try again by itself; reported after SYNC_SETTLE, not the stall time."""
    slept: list[float] = []
    ok, warnings = _wait([_state("StandAlone")] * 100, monkeypatch, slept=slept)
    assert not ok and warnings == ["Disks not in sync on node1: disk/0 (StandAlone)"]
    assert drbd.SYNC_SETTLE <= sum(slept) < drbd.SYNC_SETTLE + 5.0


def test_a_resync_that_progresses_is_not_given_up(monkeypatch) -> None:
    answers = [_state("SyncSource", sync_percent=float(p)) for p in range(1, 100)]
    ok, warnings = _wait([*answers, _IN_SYNC], monkeypatch)
    assert ok and warnings == []


def test_the_warning_names_the_state_drbd_reports() -> None:
    """What an operator (and a failed test) needs to tell a peer given up from a
    resync that never began."""
    assert drbd.describe_state({"drbd": {"cstate": "StandAlone", "role": "Primary",
                                         "peer_role": "Unknown", "disk": "UpToDate",
                                         "peer_disk": "DUnknown"}}) == \
        "StandAlone Primary/Unknown UpToDate/DUnknown"
    assert drbd.describe_state({"drbd": {"cstate": "Unconfigured"}}) == "Unconfigured"
    assert drbd.describe_state({}) == "unknown"
