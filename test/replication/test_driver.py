"""The thread driver (ganeti.replication.Replicator): what reaches the wire, and when.

The decisions themselves are tested without threads in test_core.py; these
tests block RPC handlers with a gate to see what the threads coalesce,
and step a fake clock for the resync backoff.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeClock, FakeRpc, make_config  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import errors  # noqa: E402
from ganeti.utils.payload import decode_payload
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.replication import Replicator, driver  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class Gate:
    """An RPC handler that blocks its calls (to ``nodes``, default all) until released."""

    def __init__(self, nodes: tuple[str, ...] = ()) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.nodes = nodes

    def __call__(self, node: str, args: list[Any]) -> Any:
        if self.nodes and node not in self.nodes:
            return None
        self.calls += 1
        self.entered.set()
        assert self.release.wait(20), "gate never released"
        return None

    def wait_calls(self, count: int) -> bool:
        """Wait (bounded) until ``count`` calls are held."""
        deadline = time.monotonic() + 10
        while self.calls < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.calls >= count


def _lane(rpc: FakeRpc, node: str) -> list[tuple[str, list[Any]]]:
    """The job-queue calls one candidate got, in order (each lane calls one node)."""
    return [(proc, args) for proc, nodes, args in rpc.calls
            if proc.startswith("jobqueue_") and node in nodes]


def _setup(tmp_path, clock=None, resync_interval=driver.QUEUE_RESYNC_INTERVAL, **kw):
    cfg = make_config(tmp_path, **kw)
    paths = Paths(root=str(tmp_path / "root"))
    rpc = FakeRpc(cfg)
    rep = Replicator(paths, rpc, timeout=5.0, clock=clock or time.monotonic,
                     resync_interval=resync_interval)
    rep.refresh_targets(cfg)
    cfg._on_change = lambda data, serial: rep.on_config_change(cfg, data, serial)  # as masterd
    return cfg, rpc, rep, paths


def _tag(cfg, tag: str) -> int:
    node = cfg.get_node_info_by_name(node_name(2))
    node.tags.append(tag)
    cfg.update(node)
    return cfg.get_serial_no()


def test_config_pushes_coalesce_to_the_newest_serial(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    gate = Gate()
    rpc.set_handler("replicate_state", gate)
    try:
        first = _tag(cfg, "a")
        assert gate.entered.wait(10)                 # push of `first` in flight
        serials = [_tag(cfg, t) for t in ("b", "c", "d")]
        assert rep.replicated_serial() < first
        # not yet: the newest serial waits behind the blocked push
        assert rep.wait_replicated(serials[-1], timeout=0.2) is False
    finally:
        gate.release.set()
    assert rep.wait_replicated(serials[-1], timeout=10)
    assert rep.replicated_serial() >= serials[-1]
    uploads = rpc.calls_to("replicate_state")
    # one push for `first`, then ONE for b, c and d together, with the newest bytes
    assert len(uploads) == 2
    with open(paths.config_file, encoding="utf-8") as fh:
        assert decode_payload(uploads[-1][1][0][1]).decode() == fh.read()
    assert b'"d"' in decode_payload(uploads[-1][1][0][1])
    assert rep.stop(timeout=10)


def test_wait_replicated_of_older_serial_returns_at_once_after_newer_push(tmp_path) -> None:
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=2)
    old = _tag(cfg, "a")
    new = _tag(cfg, "b")
    assert rep.wait_replicated(new, timeout=10)
    assert rep.wait_replicated(old, timeout=0)
    # a serial never handed to the replicator (failed local write) does not hang
    assert rep.wait_replicated(new + 5, timeout=5) is False
    rep.stop(timeout=5)


def test_failing_candidates_are_logged_and_do_not_block_waiters(tmp_path, caplog) -> None:
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=4)
    rpc.set_failure("replicate_state", node_name(2), "down")
    rpc.set_failure("replicate_state", node_name(3), "down")
    with caplog.at_level(logging.WARNING):
        serial = _tag(cfg, "a")
        assert rep.wait_replicated(serial, timeout=10)
    errors_logged = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors_logged) == 2                   # 2 of 3 candidates: more than half
    rep.stop(timeout=5)


def test_job_updates_coalesce_and_renames_keep_their_place(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    q = paths.queue_dir
    gate = Gate()
    rpc.set_handler("jobqueue_update_many", gate)
    try:
        rep.replicate_job_files({os.path.join(q, "job-1"): b"1a"})
        assert gate.wait_calls(2)                    # both lanes hold 1a on the wire
        rep.replicate_job_files({os.path.join(q, "job-1"): b"1b",
                                 os.path.join(q, "job-2"): b"2a"})
        rep.replicate_job_file(os.path.join(q, "job-1"), b"1c")
        rep.replicate_renames([(os.path.join(q, "job-1"), os.path.join(q, "archive/0/job-1"))])
        rep.replicate_job_file(os.path.join(q, "job-2"), b"2b")
        rep.replicate_job_file(os.path.join(q, "job-2"), b"2c")
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    assert all(len(nodes) == 1 for _, nodes, _ in rpc.calls)      # one call per lane
    assert _lane(rpc, node_name(2)) == _lane(rpc, node_name(3)) == [
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1a"]]]),
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1c"],
                                   ["/var/lib/ganeti/queue/job-2", "2a"]]]),
        ("jobqueue_rename", [[["/var/lib/ganeti/queue/job-1",
                               "/var/lib/ganeti/queue/archive/0/job-1"]]]),
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-2", "2c"]]]),
    ]
    rep.stop(timeout=5)


def test_queue_copy_to_a_new_candidate_is_ordered_with_updates(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    q = paths.queue_dir
    os.makedirs(os.path.join(q, "archive", "0"))
    job1 = os.path.join(q, "job-1")

    def write(path: str, data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data)

    write(os.path.join(q, "serial"), b"1\n")
    write(os.path.join(q, "archive", "0", "job-0"), b"old")   # archived: not copied
    gate = Gate()
    rpc.set_handler("jobqueue_update_many", gate)
    try:
        rep.replicate_job_files({job1: b"1a"})
        assert gate.wait_calls(2)
        write(job1, b"1b")
        rep.replicate_queue_to([node_name(3)])
        write(job1, b"1c")            # the copy reads what is on disk when it is sent
        rep.replicate_job_files({job1: b"1c"})
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    assert _lane(rpc, node_name(3)) == [
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1a"]]]),
        ("jobqueue_sync", [[["/var/lib/ganeti/queue/job-1", "1c"],
                            ["/var/lib/ganeti/queue/serial", "1\n"]],
                           ["job-1", "serial"], 1]),
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1c"]]]),
    ]
    assert _lane(rpc, node_name(2)) == [        # the copy is for node3 only
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1a"]]]),
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "1c"]]]),
    ]
    rep.stop(timeout=5)


def test_drain_flag_changes_coalesce_to_the_last(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    gate = Gate()
    rpc.set_handler("jobqueue_update_many", gate)
    try:
        rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"1")
        assert gate.wait_calls(2)
        rep.replicate_drain_flag(True)
        rep.replicate_drain_flag(False)
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    for node in (node_name(2), node_name(3)):
        assert _lane(rpc, node)[1:] == [("jobqueue_set_drain_flag", [False])]
    rep.stop(timeout=5)


def test_a_candidate_that_missed_updates_gets_the_whole_queue(tmp_path) -> None:
    clock = FakeClock()
    cfg, rpc, rep, paths = _setup(tmp_path, clock=clock, nodes=3)
    q = paths.queue_dir
    os.makedirs(q)
    for name, data in (("job-1", b"1"), ("job-2", b"2"), ("serial", b"2\n")):
        with open(os.path.join(q, name), "wb") as fh:
            fh.write(data)
    update = rep.replicate_job_file
    rpc.set_failure("jobqueue_update_many", node_name(3), "connection refused")
    rpc.set_failure("jobqueue_sync", node_name(3), "connection refused")
    update(os.path.join(q, "job-1"), b"1")
    assert rep.flush(timeout=10)
    # no copy at once: the first resync waits one interval
    assert [c[0] for c in _lane(rpc, node_name(3))] == ["jobqueue_update_many"]
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    update(os.path.join(q, "job-2"), b"2")
    assert rep.flush(timeout=10)
    # (sorted: should the lane's real-time wait for the due resync run out before
    # the update is queued, the copy goes first, alone: just as good)
    assert sorted(c[0] for c in _lane(rpc, node_name(3))[1:]) == [
        "jobqueue_sync", "jobqueue_update_many"]            # failed: next try in 2 intervals
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    update(os.path.join(q, "job-2"), b"2")
    assert rep.flush(timeout=10)
    assert [c[0] for c in _lane(rpc, node_name(3))[3:]] == ["jobqueue_update_many"]
    # the node is back; once the backoff has passed the next operation brings it all
    rpc.set_result("jobqueue_update_many", node_name(3), None)
    rpc.set_result("jobqueue_sync", node_name(3), [])
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    update(os.path.join(q, "job-2"), b"2")
    assert rep.flush(timeout=10)
    assert sorted(_lane(rpc, node_name(3))[4:]) == [
        ("jobqueue_sync", [[["/var/lib/ganeti/queue/job-1", "1"],
                            ["/var/lib/ganeti/queue/job-2", "2"],
                            ["/var/lib/ganeti/queue/serial", "2\n"]],
                           ["job-1", "job-2", "serial"], 2]),
        ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-2", "2"]]])]
    # caught up: no more copies
    update(os.path.join(q, "job-2"), b"2")
    assert rep.flush(timeout=10)
    assert [c[0] for c in _lane(rpc, node_name(3))[6:]] == ["jobqueue_update_many"]
    # node2 never missed anything: updates only
    assert {c[0] for c in _lane(rpc, node_name(2))} == {"jobqueue_update_many"}
    rep.stop(timeout=5)


def test_a_large_queue_is_copied_in_parts(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=4)
    os.makedirs(paths.queue_dir)
    for idx in range(1, 6):
        with open(os.path.join(paths.queue_dir, f"job-{idx}"), "w") as fh:
            fh.write("x" * 4)
    rpc.set_failure("jobqueue_update_many", node_name(2), "down")
    wanted = [[node_name(2), node_name(3), node_name(4)]]

    def still_wanted(names):       # node4 stops being a candidate after the first part
        keep = [n for n in names if n in wanted[-1]]
        wanted.append([node_name(2), node_name(3)])
        return keep

    assert driver.copy_queue(rpc, paths, [node_name(2), node_name(3), node_name(4)],
                             still_wanted=still_wanted, chunk=10) == [node_name(2)]
    sent = [(proc, nodes, [name for name, _ in args[0]]) for proc, nodes, args in rpc.calls]
    q = "/var/lib/ganeti/queue/"
    assert sent == [
        ("jobqueue_update_many", [node_name(2), node_name(3), node_name(4)],
         [q + "job-1", q + "job-2"]),
        ("jobqueue_update_many", [node_name(3)], [q + "job-3", q + "job-4"]),
        ("jobqueue_sync", [node_name(3)], [q + "job-5"])]
    assert rpc.calls[-1][2][1:] == [["job-1", "job-2", "job-3", "job-4", "job-5"], 0]
    rep.stop(timeout=5)


def test_an_unreadable_queue_sends_nothing(tmp_path, monkeypatch) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    os.makedirs(paths.queue_dir)

    def listdir(path):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(driver.os, "listdir", listdir)
    # a partial or empty list must never make the node archive its queue
    assert driver.copy_queue(rpc, paths, [node_name(3)]) == [node_name(3)]
    monkeypatch.undo()
    assert rpc.calls == []
    rep.stop(timeout=5)


def test_a_stale_node_that_left_the_candidates_gets_no_copy(tmp_path) -> None:
    clock = FakeClock()
    cfg, rpc, rep, paths = _setup(tmp_path, clock=clock, nodes=3)
    rpc.set_failure("jobqueue_update_many", node_name(3), "down")
    rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"1")
    assert rep.flush(timeout=10)
    assert rep.stale_candidates() == {node_name(3)}
    node = cfg.get_node_info_by_name(node_name(3))
    node.master_candidate = False
    cfg.update(node)
    assert rep.flush(timeout=10)
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)       # the resync is due now
    rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"1")
    assert rep.flush(timeout=10)
    assert rpc.calls_to("jobqueue_sync") == [] and rep.stale_candidates() == set()
    rep.stop(timeout=5)


def test_work_after_stop_is_done_inline(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=2)
    assert rep.stop(timeout=5)
    rep.replicate_job_file(os.path.join(paths.queue_dir, "job-9"), b"x")
    assert rpc.calls_to("jobqueue_update_many")       # sent before returning
    serial = _tag(cfg, "z")
    assert rep.replicated_serial() == serial


def test_a_config_lane_block_runs_between_pushes_never_beside_one(tmp_path) -> None:
    """What ``redist-conf`` writes itself (doc/design/replication.md,
    "Redistribution") waits for the push under way, and a push queued
    meanwhile goes after it: older bytes never land after newer ones."""
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=3)
    gate = Gate()
    rpc.set_handler("replicate_state", gate)
    inside, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def block() -> None:
        with rep.config_lane(timeout=20):
            seen.append(len(rpc.calls_to("replicate_state")))
            inside.set()
            assert leave.wait(20)

    first = _tag(cfg, "a")
    assert gate.entered.wait(10)                      # the push of `first` in flight
    holder = threading.Thread(target=block)
    holder.start()
    try:
        assert not inside.wait(0.3)                   # not beside the push
        gate.release.set()
        assert inside.wait(10)
        assert rep.replicated_serial() >= first and seen == [1]
        second = _tag(cfg, "b")
        assert rep.wait_replicated(second, timeout=0.3) is False   # waits for the block
        assert len(rpc.calls_to("replicate_state")) == 1
    finally:
        gate.release.set()
        leave.set()
        holder.join(20)
    assert rep.wait_replicated(second, timeout=10)
    assert len(rpc.calls_to("replicate_state")) == 2
    assert rep.stop(timeout=10)


def test_a_config_lane_that_cannot_be_taken_in_time_is_an_error(tmp_path) -> None:
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=2)
    gate = Gate()
    rpc.set_handler("replicate_state", gate)
    try:
        _tag(cfg, "a")
        assert gate.entered.wait(10)
        with pytest.raises(errors.OpExecError, match="was busy"):
            with rep.config_lane(timeout=0.2):
                pass
    finally:
        gate.release.set()
    with rep.config_lane(timeout=10):                 # taken once the push ended
        pass
    assert rep.stop(timeout=10)


def test_a_config_lane_is_not_starved_by_a_stream_of_config_writes(tmp_path) -> None:
    """Config writes arriving faster than a push takes: the lane still goes to
    the block right after the push under way (no new one starts meanwhile)."""
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=3)
    rpc.set_handler("replicate_state", lambda node, args: time.sleep(0.02))
    stop = threading.Event()

    def writer() -> None:
        count = 0
        while not stop.is_set():
            _tag(cfg, f"t{count}")
            count += 1
            time.sleep(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not rpc.calls_to("replicate_state") and time.monotonic() < deadline:
            time.sleep(0.01)                          # the stream of pushes is going
        for _ in range(3):
            with rep.config_lane(timeout=5):
                pass
    finally:
        stop.set()
        thread.join(20)
    assert rep.wait_replicated(cfg.get_serial_no(), timeout=10)
    assert rep.stop(timeout=10)


def test_after_stop_a_write_never_waits_for_a_held_lane_and_its_push_follows(tmp_path) -> None:
    """After stop() a config write pushes in the writer's thread, under the config
    lock: with the lane held it must not wait (the holder's RPCs need that lock
    to resolve node names); the holder sends the push when it lets go."""
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=3)
    assert rep.stop(timeout=5)
    inside, leave = threading.Event(), threading.Event()

    def block() -> None:
        with rep.config_lane(timeout=10):
            inside.set()
            cfg.get_all_nodes_info()                  # takes the config lock
            assert leave.wait(20)

    holder = threading.Thread(target=block)
    holder.start()
    try:
        assert inside.wait(10)
        done: list[int] = []
        writer = threading.Thread(target=lambda: done.append(_tag(cfg, "late")))
        writer.start()
        writer.join(10)
        assert done, "a config write after stop waited for the held lane"
        assert rep.replicated_serial() < done[0]      # not sent beside the block
    finally:
        leave.set()
        holder.join(20)
    assert rep.replicated_serial() == done[0]         # sent when the lane was let go
    assert len(rpc.calls_to("replicate_state")) == 1


def test_stale_config_bytes_never_replace_newer_ones(tmp_path) -> None:
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=2)
    new = _tag(cfg, "new")
    assert rep.wait_replicated(new, timeout=10)
    pushes = len(rpc.calls_to("replicate_state"))
    rep.on_config_change(cfg, b"old bytes", new - 1)    # late, out of order
    assert rep.flush(timeout=10)
    assert len(rpc.calls_to("replicate_state")) == pushes
    assert rep.replicated_serial() == new
    rep.stop(timeout=5)


def test_an_idle_queue_still_resyncs_a_stale_candidate(tmp_path) -> None:
    # real time on purpose: the job thread must wake up by itself
    cfg, rpc, rep, paths = _setup(tmp_path, resync_interval=0.2, nodes=3)
    os.makedirs(paths.queue_dir)
    rpc.set_failure("jobqueue_update_many", node_name(3), "down")
    rpc.set_failure("jobqueue_sync", node_name(3), "down")
    rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"1")
    assert rep.flush(timeout=10)
    rpc.set_result("jobqueue_sync", node_name(3), [])      # the node is back; no new jobs
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not rpc.calls_to("jobqueue_sync"):
        time.sleep(0.02)
    syncs = rpc.calls_to("jobqueue_sync")
    assert syncs and syncs[-1][0] == [node_name(3)]
    time.sleep(0.5)                     # caught up: it stops trying
    assert len(rpc.calls_to("jobqueue_sync")) == len(syncs)
    rep.stop(timeout=5)


def test_flush_waits_for_a_resync_in_flight(tmp_path) -> None:
    # node removal and demotion flush before contacting the node: a copy still
    # on its way would land after the node left
    cfg, rpc, rep, paths = _setup(tmp_path, resync_interval=0.1, nodes=3)
    os.makedirs(paths.queue_dir)
    rpc.set_failure("jobqueue_update_many", node_name(3), "down")
    gate = Gate()
    rpc.set_handler("jobqueue_sync", gate)
    rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"1")
    assert rep.flush(timeout=10)
    try:
        assert gate.entered.wait(10)                      # the idle resync is on the wire
        assert rep.flush(timeout=0.3) is False
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    rep.stop(timeout=5)


def test_a_held_candidate_delays_neither_the_quorum_nor_the_other_lanes(tmp_path) -> None:
    # doc/design/replication.md, "Job files: one lane per candidate": node3's request hangs (a paused node);
    # node2 confirms every batch, and with the master that is a majority of 3
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    gate = Gate(nodes=(node_name(3),))
    rpc.set_handler("jobqueue_update_many", gate)
    try:
        for idx in range(1, 4):
            seq = rep.replicate_job_files({os.path.join(paths.queue_dir, f"job-{idx}"): b"x"})
            rep.wait_job_quorum(seq, timeout=10)        # no wait for node3
            assert gate.wait_calls(1)
        assert gate.calls == 1                          # node3 holds its first batch
        assert len(_lane(rpc, node_name(2))) == 3       # node2 got all three, one by one
        assert rep.flush(timeout=0.2) is False          # node3's lane is not done
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    # node3 then gets what was queued meanwhile, in one request after the held one
    assert [args for _, args in _lane(rpc, node_name(3))] == [
        [[["/var/lib/ganeti/queue/job-1", "x"]]],
        [[["/var/lib/ganeti/queue/job-2", "x"], ["/var/lib/ganeti/queue/job-3", "x"]]]]
    rep.stop(timeout=5)


def test_a_config_push_in_flight_does_not_hold_job_files(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    gate = Gate()
    rpc.set_handler("replicate_state", gate)
    try:
        _tag(cfg, "a")
        assert gate.entered.wait(10)                    # a config push on the wire
        seq = rep.replicate_job_files({os.path.join(paths.queue_dir, "job-1"): b"1"})
        rep.wait_job_quorum(seq, timeout=10)
        assert all(args[2] == [] for _, args in rpc.calls_to("replicate_state"))
    finally:
        gate.release.set()
    assert rep.flush(timeout=10)
    rep.stop(timeout=5)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def test_a_resync_that_raises_keeps_its_nodes_stale_and_backs_off(tmp_path, caplog) -> None:
    clock = FakeClock()
    cfg, rpc, rep, paths = _setup(tmp_path, clock=clock, nodes=3)
    os.makedirs(paths.queue_dir)
    job1, job2 = (os.path.join(paths.queue_dir, name) for name in ("job-1", "job-2"))
    rpc.set_failure("jobqueue_update_many", node_name(3), "down")
    rep.replicate_job_file(job1, b"1")
    assert rep.flush(timeout=10)
    assert rep.stale_candidates() == {node_name(3)}
    rpc.set_result("jobqueue_update_many", node_name(3), None)
    _write(job2, b"\xff")             # not UTF-8: the copy raises before any request
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    with caplog.at_level(logging.ERROR):
        rep.replicate_job_file(job1, b"1")           # its batch runs the due resync
        assert rep.flush(timeout=10)
    assert rep.stale_candidates() == {node_name(3)}
    assert [r for r in caplog.records if r.exc_info and "resynchronisation" in r.getMessage()]
    _write(job2, b"2")
    # it counted as a failed resync: the next one comes two intervals later
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    rep.replicate_job_file(job1, b"1")
    assert rep.flush(timeout=10)
    assert rpc.calls_to("jobqueue_sync") == []
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    rep.replicate_job_file(job1, b"1")
    assert rep.flush(timeout=10)
    assert [nodes for nodes, _ in rpc.calls_to("jobqueue_sync")] == [[node_name(3)]]
    assert rep.stale_candidates() == set()
    rep.stop(timeout=5)


@pytest.mark.parametrize("send, stale", [
    ("update", {node_name(2), node_name(3)}),        # every current candidate
    ("copy", {node_name(3)}),                        # the copy's own targets
], ids=["file-update", "queue-copy"])
def test_a_job_file_send_that_raises_makes_its_targets_stale(tmp_path, caplog,
                                                              send, stale) -> None:
    clock = FakeClock()
    cfg, rpc, rep, paths = _setup(tmp_path, clock=clock, nodes=3)
    os.makedirs(paths.queue_dir)
    job1 = os.path.join(paths.queue_dir, "job-1")
    _write(job1, b"\xff")             # not UTF-8: the send raises before any request
    with caplog.at_level(logging.ERROR):
        if send == "update":
            rep.replicate_job_file(job1, b"\xff")
        else:
            rep.replicate_queue_to([node_name(3)])
        assert rep.flush(timeout=10)
    assert [c for c in rpc.calls if c[0].startswith("jobqueue_")] == []
    assert rep.stale_candidates() == stale
    assert [r for r in caplog.records if r.exc_info]
    # one interval later the resync brings them what the master has now
    _write(job1, b"1")
    clock.advance(driver.QUEUE_RESYNC_INTERVAL)
    rep.replicate_drain_flag(False)
    assert rep.flush(timeout=10)
    # (one copy per lane)
    assert sorted(n for nodes, _ in rpc.calls_to("jobqueue_sync") for n in nodes) == sorted(stale)
    assert rep.stale_candidates() == set()
    rep.stop(timeout=5)


def test_an_ssconf_fan_out_that_raises_is_a_failed_delivery(tmp_path, caplog) -> None:
    cfg, rpc, rep, _ = _setup(tmp_path, nodes=4, candidates=3)     # node4: ssconf only
    raised = []

    def write_ssconf(node: str, args: list[Any]) -> None:
        if not raised:
            raised.append(node)
            raise RuntimeError("worker bug")
        return None

    rpc.set_handler("write_ssconf_files", write_ssconf)
    with caplog.at_level(logging.ERROR):
        assert rep.wait_replicated(_tag(cfg, "a"), timeout=10)
    assert raised == [node_name(4)]
    # the same values again: node4 never got them, so this push sends them
    assert rep.wait_replicated(_tag(cfg, "b"), timeout=10)
    sent = rpc.calls_to("write_ssconf_files")
    assert [nodes for nodes, _ in sent] == [[node_name(4)], [node_name(4)]]
    assert sent[0][1] == sent[1][1]
    assert [r for r in caplog.records if r.exc_info and "ssconf" in r.getMessage()]
    rep.stop(timeout=5)


def test_a_symlinked_job_entry_is_not_followed_nor_replicated(tmp_path, caplog) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    q = paths.queue_dir
    os.makedirs(q)
    outside = tmp_path / "secret"
    outside.write_bytes(b"outside the queue")
    with open(os.path.join(q, "job-1"), "wb") as fh:
        fh.write(b"1")
    os.symlink(outside, os.path.join(q, "job-2"))
    os.mkdir(os.path.join(q, "job-3"))
    with caplog.at_level(logging.ERROR):
        serial, files = driver.read_queue_files(paths)
    assert files == [(os.path.join(q, "job-1"), b"1")]
    assert "job-2 is a symbolic link" in caplog.text and "job-3 is a directory" in caplog.text
    assert driver.copy_queue(rpc, paths, [node_name(3)]) == []
    assert all(b"outside" not in repr(call).encode() for call in rpc.calls)
    assert rpc.calls[-1][2][1:] == [["job-1"], 0]
    os.unlink(os.path.join(q, "job-2"))
    os.symlink(outside, os.path.join(q, "serial"))
    with pytest.raises(OSError, match="Untrusted queue serial"):
        driver.read_queue_files(paths)
    rep.stop(timeout=5)


def test_wait_job_quorum_returns_once_a_majority_holds_the_files(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)       # master + 2 candidates

    def fail_on_3(node: str, args: list[Any]) -> Any:
        if node == node_name(3):
            raise errors.RemoteError("disk full")
        return None

    rpc.set_handler("jobqueue_update_many", fail_on_3)
    seq = rep.replicate_job_files({os.path.join(paths.queue_dir, "job-1"): b"1"})
    rep.wait_job_quorum(seq, timeout=10)                     # master + node2: 2 of 3
    rep.stop(timeout=5)


def test_wait_job_quorum_refuses_files_on_a_minority(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)

    def fail(node: str, args: list[Any]) -> Any:
        raise errors.RemoteError("disk full")

    rpc.set_handler("jobqueue_update_many", fail)
    seq = rep.replicate_job_files({os.path.join(paths.queue_dir, "job-1"): b"1"})
    with pytest.raises(errors.JobQueueQuorumError, match="1 of 3 master candidates"):
        rep.wait_job_quorum(seq, timeout=10)
    rep.stop(timeout=5)


def test_wait_job_quorum_gives_up_after_its_timeout(tmp_path) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    gate = Gate()
    rpc.set_handler("jobqueue_update_many", gate)
    try:
        seq = rep.replicate_job_files({os.path.join(paths.queue_dir, "job-1"): b"1"})
        with pytest.raises(errors.JobQueueQuorumError, match="within"):
            rep.wait_job_quorum(seq, timeout=0.2)
    finally:
        gate.release.set()
    rep.stop(timeout=5)


def test_a_held_status_update_reaches_the_candidates_on_its_own(tmp_path) -> None:
    """A batch nobody waits for (urgent=False) waits at most LAZY_DELAY for
    company, then its lane sends it without any further traffic."""
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    q = paths.queue_dir
    try:
        rep.replicate_job_files({os.path.join(q, "job-1"): b"success"}, urgent=False)
        deadline = time.monotonic() + 10
        # (each node's lane sends on its own: wait for both)
        while time.monotonic() < deadline and \
                min(len(_lane(rpc, node_name(n))) for n in (2, 3)) < 1:
            time.sleep(0.005)
        assert _lane(rpc, node_name(2)) == _lane(rpc, node_name(3)) == [
            ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "success"]]])]
    finally:
        rep.stop(timeout=5)


def test_a_new_job_takes_the_held_updates_along_in_one_request(tmp_path) -> None:
    # a clock standing still: the held update never falls due on its own
    cfg, rpc, rep, paths = _setup(tmp_path, clock=FakeClock(), nodes=3)
    q = paths.queue_dir
    try:
        rep.replicate_job_files({os.path.join(q, "job-1"): b"success"}, urgent=False)
        seq = rep.replicate_job_files({os.path.join(q, "job-2"): b"queued"})
        rep.wait_job_quorum(seq, timeout=10)
        assert rep.flush(timeout=10)
        assert _lane(rpc, node_name(2)) == _lane(rpc, node_name(3)) == [
            ("jobqueue_update_many", [[["/var/lib/ganeti/queue/job-1", "success"],
                                       ["/var/lib/ganeti/queue/job-2", "queued"]]])]
    finally:
        rep.stop(timeout=5)


def test_a_failed_job_file_send_names_its_files_in_the_warning(tmp_path, caplog) -> None:
    cfg, rpc, rep, paths = _setup(tmp_path, nodes=3)
    rpc.set_failure("jobqueue_update_many", node_name(2), "disk full")
    with caplog.at_level(logging.WARNING):
        rep.replicate_job_files({os.path.join(paths.queue_dir, "job-7"): b"7",
                                 os.path.join(paths.queue_dir, "job-3"): b"3"})
        assert rep.flush(timeout=10)
    assert f"Job queue replication of job-3, job-7 failed on node {node_name(2)}: " \
        in caplog.text and "disk full" in caplog.text
    rep.stop(timeout=5)
