"""The master following disk transfers: progress lines, failures, clean-up."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.clock import FakeClock
from fakes.fakerpc import FakeRpc
from ganeti import errors, progress
from ganeti.cmdlib.impexp import Stall, Transfer, run_transfers


class _LU:
    def __init__(self, rpc: FakeRpc) -> None:
        self.rpc = rpc
        self.warnings: list[str] = []
        self.entries: list[dict[str, Any]] = []
        self.table = progress.RuntimeTable()
        self.seen_jobs: list[list[dict[str, Any]]] = []

    def require_rpc(self) -> Any:
        return self.rpc

    def LogWarning(self, message: str) -> None:
        self.warnings.append(message)

    def progress_reporter(self, op: str, *, clock: Any, instance: str | None,
                          device: str) -> progress.Reporter:
        def emit(msg: dict[str, Any]) -> None:
            self.entries.append(msg)
            self.seen_jobs.append(self.table.jobs("inst1"))
        wrapped = progress.table_emitter(emit, self.table, instance or "", "k", device=device)
        return progress.Reporter(wrapped, op, clock=clock)


def _setup(statuses: list[Any]) -> tuple[_LU, FakeRpc]:
    rpc = FakeRpc()
    rpc.resolver = lambda names: [(n, "192.0.2.2", 1811, False) for n in names]
    rpc.set_result("impexp_send", "n1", "t-1")

    def status(node: str, args: list[Any]) -> Any:
        item = statuses.pop(0)
        if isinstance(item, Exception):
            raise item
        return [item]
    rpc.set_handler("impexp_status", status)
    return _LU(rpc), rpc


def _xfer() -> Transfer:
    return Transfer(label="disk/0", src_node="n1", source={"kind": "file", "export": "e1", "file": "x"},
                    dst_node="n2", dest={"kind": "export"}, op="export", instance="inst1")


def test_progress_and_the_final_line() -> None:
    mib = 1 << 20
    lu, rpc = _setup([{"state": "running", "done": 0, "total": 64 * mib, "elapsed": 0},
                      {"state": "running", "done": 16 * mib, "total": 64 * mib, "elapsed": 1},
                      {"state": "running", "done": 32 * mib, "total": 64 * mib, "elapsed": 2},
                      {"state": "done", "done": 64 * mib, "total": 64 * mib, "elapsed": 4,
                       "sha256": "ab" * 32, "size": 64 * mib}])
    lines: list[str] = []
    xfer = _xfer()
    clock = FakeClock()
    run_transfers(lu, [xfer], lines.append, clock=clock, sleep=clock.sleep, poll=1.0)
    assert xfer.result is not None and xfer.result["size"] == 64 * mib
    # typed entries: one a second, the node's rate; exactly one final entry
    assert [(m["op"], m["cur"], m["done"]) for m in lu.entries] == [
        ("export", 0, False), ("export", 16 * mib, False), ("export", 32 * mib, False),
        ("export", 64 * mib, True)]
    assert lu.entries[1]["rate"] == 16 * mib and lu.entries[1]["eta"] == 3.0
    assert lu.entries[-1]["error"] is None
    # the instance's runtime job while it ran, gone with the final entry
    assert lu.seen_jobs[1][0]["info"]["cur"] == 16 * mib
    assert lu.seen_jobs[1][0]["info"]["device"] == "disk/0"
    assert lu.seen_jobs[-1] == []
    assert lines[-1].startswith("disk/0: 64.0 MiB of 64.0 MiB (100%), 16.0 MiB/s in 4.0 s")
    assert rpc.calls_to("impexp_send")[0][1][2:] == ["192.0.2.2", 1811]
    assert rpc.calls_to("impexp_abort") == []          # it finished
    assert rpc.calls_to("impexp_cleanup") == [(["n1"], ["t-1"])]


def test_a_failed_transfer_raises_and_cleans_up() -> None:
    lu, rpc = _setup([{"state": "failed", "done": 5, "error": "No space left"}])
    with pytest.raises(errors.OpExecError, match="disk/0: No space left"):
        run_transfers(lu, [_xfer()], lambda m: None, sleep=lambda s: None)
    assert rpc.calls_to("impexp_cleanup") == [(["n1"], ["t-1"])]
    assert [m["done"] for m in lu.entries] == [False, True]
    assert lu.entries[-1]["error"] == "disk/0: No space left"
    assert lu.table.jobs("inst1") == []


def test_a_silent_sending_node_counts_as_dead() -> None:
    clock = FakeClock()
    lu, rpc = _setup([errors.RpcTransportError("connection refused")] * 20)
    with pytest.raises(errors.OpExecError, match="stopped answering"):
        run_transfers(lu, [_xfer()], lambda m: None, clock=clock, sleep=clock.sleep,
                      poll=1.0, lost_after=5.0)
    assert clock() - 1000.0 == pytest.approx(5.0)
    assert rpc.calls_to("impexp_abort") == [(["n1"], ["t-1"])]


def test_a_transfer_moving_no_byte_is_stopped() -> None:
    clock = FakeClock()
    running = {"state": "running", "done": 7, "total": 100, "elapsed": 1}
    lu, rpc = _setup([{"state": "running", "done": 0, "total": 100, "elapsed": 0}]
                     + [running] * 50)
    with pytest.raises(errors.OpExecError, match=r"disk/0: no data moved for 10 s \(after 7"
                       r" bytes\); the transfer was stopped"):
        run_transfers(lu, [_xfer()], lambda m: None, clock=clock, sleep=clock.sleep,
                      poll=1.0, stall_after=10.0)
    assert clock() - 1000.0 == pytest.approx(11.0)   # 7 bytes at 1 s, then 10 s of nothing
    assert rpc.calls_to("impexp_abort") == [(["n1"], ["t-1"])]
    assert rpc.calls_to("impexp_cleanup") == [(["n1"], ["t-1"])]


def test_stall_is_pure() -> None:
    stall = Stall(5.0, 0.0)
    assert not stall.seen(0, 4.0) and not stall.seen(0, 4.9)
    assert not stall.seen(10, 9.0)             # a byte moved: the watch starts again
    assert not stall.seen(10, 13.9) and stall.seen(10, 14.0)


def test_the_first_byte_gets_the_start_window() -> None:
    stall = Stall(5.0, 0.0, first=20.0)
    assert not stall.seen(0, 0.0) and not stall.seen(0, 19.9) and stall.seen(0, 20.0)
    stall = Stall(5.0, 0.0, first=20.0)
    assert not stall.seen(0, 1.0) and not stall.seen(3, 2.0)
    assert not stall.seen(3, 6.9) and stall.seen(3, 7.0)   # then the usual window


def test_a_transfer_that_never_starts_is_stopped_after_the_start_window() -> None:
    clock = FakeClock()
    lu, rpc = _setup([{"state": "running", "done": 0, "total": None, "elapsed": 0}] * 50)
    with pytest.raises(errors.OpExecError, match=r"disk/0: no data moved for 30 s \(after 0"
                       r" bytes\); the transfer was stopped"):
        run_transfers(lu, [_xfer()], lambda m: None, clock=clock, sleep=clock.sleep,
                      poll=1.0, stall_after=10.0, start_after=30.0)
    assert clock() - 1000.0 == pytest.approx(30.0)
    assert rpc.calls_to("impexp_abort") == [(["n1"], ["t-1"])]


def test_a_killed_job_stops_its_transfer_at_the_next_poll() -> None:
    lu, rpc = _setup([{"state": "running", "done": 5, "total": 100, "elapsed": 1}] * 10)
    waits: list[float] = []

    def killed_on_second_wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) >= 2
    with pytest.raises(errors.OpExecError, match="disk/0: transfer interrupted: the job was"
                       " killed"):
        run_transfers(lu, [_xfer()], lambda m: None, sleep=killed_on_second_wait, poll=0.5)
    assert waits == [0.5, 0.5]
    assert rpc.calls_to("impexp_abort") == [(["n1"], ["t-1"])]
    assert rpc.calls_to("impexp_cleanup") == [(["n1"], ["t-1"])]
    assert lu.table.jobs("inst1") == []


def test_waiting_for_the_answer_after_the_last_byte_is_no_stall() -> None:
    clock = FakeClock()
    sent = {"state": "running", "done": 100, "total": 100, "elapsed": 1}
    lu, _ = _setup([sent] * 30 + [{"state": "done", "done": 100, "total": 100, "elapsed": 31,
                                   "sha256": "ab" * 32, "size": 100}])
    run_transfers(lu, [_xfer()], lambda m: None, clock=clock, sleep=clock.sleep, poll=1.0,
                  stall_after=10.0)
    assert clock() - 1000.0 == pytest.approx(30.0)


def test_a_debian_export_path_names_the_export_of_that_name() -> None:
    """Upstream clients built for Debian name exports below /var/lib/ganeti/export."""
    from ganeti.cmdlib.instance_import import source_name

    assert source_name("/var/lib/ganeti/export/burn1.example.com") == "burn1.example.com"
    assert source_name("/var/lib/ganeti/export/a/../web1") == "web1"
    # anything else stays as given (the node confines it to its export dir)
    for path in ("/var/lib/ganeti/export/../config.data", "/var/lib/ganeti/export/",
                 "/var/lib/ganeti/exportx/web1", "/srv/ganeti/export/web1", "web1"):
        assert source_name(path) == path
