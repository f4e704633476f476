"""drbd.wait_for_sync: a mirror just set up that has not begun its resync is waited for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ganeti.cmdlib import drbd

_DEGRADED = {"is_degraded": True, "sync_percent": None, "drbd": {"cstate": "Connected"}}
_SYNCING = {"is_degraded": True, "sync_percent": 50.0, "drbd": {"cstate": "SyncSource"}}
_IN_SYNC = {"is_degraded": False, "sync_percent": None, "drbd": {"cstate": "Connected"}}


def _wait(answers: list[dict[str, Any]], monkeypatch) -> tuple[bool, list[str]]:
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
    ok = drbd.wait_for_sync(lu, node, [disk], lambda msg: None, cfg=None,  # type: ignore[arg-type]
                            clock=lambda: now[0], sleep=sleep, poll=5.0)
    return ok, warnings


def test_a_resync_that_begins_late_is_waited_for(monkeypatch) -> None:
    ok, warnings = _wait([_DEGRADED, _DEGRADED, _SYNCING, _IN_SYNC], monkeypatch)
    assert ok and warnings == []


def test_a_mirror_that_never_resyncs_is_reported_after_the_settle_time(monkeypatch) -> None:
    ok, warnings = _wait([_DEGRADED] * 10, monkeypatch)
    assert not ok and warnings == ["Disks not in sync on node1: disk/0"]
