"""The master daemon's lease and fencing as wired by build_context (fake RPC, fake clock)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_config  # noqa: E402
from fakes.clock import FakeClock  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import errors, luxi, opcodes  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import mastercontext, masterd, masterstart  # noqa: E402


@pytest.fixture
def wired(tmp_path, monkeypatch):
    make_config(tmp_path, nodes=3)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    fake: list[FakeRpc] = []

    def build_rpc(cfg, paths, *args):
        fake.append(FakeRpc(cfg))
        return fake[0]

    monkeypatch.setattr(mastercontext, "_build_rpc", build_rpc)
    monkeypatch.setenv("GANETI_HOSTNAME", node_name(1))
    checks: list = []
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE,
                                write_checks=checks)
    rpc = fake[0]
    rpc.set_handler("master_lease", lambda node, args: {"master": node_name(1), "epoch": 0})
    clock = FakeClock()
    opts = argparse.Namespace(lease_duration=6.0, rpc_timeout_scale=1.0, no_voting=False)
    guard = masterstart.make_guard(ctx, opts, checks, clock=clock)
    yield ctx, rpc, clock, guard
    ctx.replicator.stop(timeout=10)


def test_config_writes_need_the_lease(wired):
    ctx, rpc, clock, guard = wired
    cfg = ctx.cfg
    cfg.update(cfg.get_cluster_info())               # first write: a renewal first
    assert len(rpc.calls_to("master_lease")) == 3
    serial = cfg.get_serial_no()
    clock.advance(7.0)                               # the lease ran out; the others are gone
    for name in (node_name(2), node_name(3)):
        rpc.set_failure("master_lease", name, "timed out")
    with pytest.raises(errors.ConfigurationError, match="master lease has expired"):
        cfg.update(cfg.get_cluster_info())
    assert cfg.get_serial_no() == serial              # undone


def _call(disp, method, args):
    frame = luxi.encode_request(method, args, None).rstrip(b"\x03")
    return luxi.parse_response(disp.handle(frame).rstrip(b"\x03"))


_OPS = [opcodes.to_dict(opcodes.OpTestDelay(duration=0))]
_REFUSAL = ("Fenced: master epoch 0 (from node1) is older than epoch 65538 accepted from"
            " node2; master_lease refused")


def test_one_refusal_does_not_fence(wired):
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    assert _call(disp, "SubmitJob", [_OPS]) > 0
    # one node refuses our epoch (as the RPC runner reports it): a round, still a majority
    ctx.rpc.on_fenced(node_name(2), _REFUSAL)
    guard.renew()
    assert guard.fenced is None
    assert _call(disp, "SubmitJob", [_OPS]) > 0


def test_fenced_by_a_majority_refuses_every_request_and_writes(wired):
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    assert _call(disp, "SubmitJob", [_OPS]) > 0
    for name in (node_name(2), node_name(3)):
        rpc.set_failure("master_lease", name, _REFUSAL)
    assert guard.renew() is False
    with pytest.raises(errors.NotMasterError, match="no longer the master; the master is node2"):
        _call(disp, "SubmitJob", [_OPS])
    with pytest.raises(errors.NotMasterError, match="the master is node2"):
        _call(disp, "QueryClusterInfo", [])
    with pytest.raises(errors.ConfigurationError, match="no longer the master"):
        ctx.cfg.update(ctx.cfg.get_cluster_info())


def test_drain_master_refuses_submissions_retryably(wired):
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    last = _call(disp, "SubmitJob", [_OPS])
    answer = _call(disp, "DrainMaster", [30])
    assert answer == {"last_job_id": last, "flushed": True}
    with pytest.raises(errors.MasterFailingOverError, match="failing over"):
        _call(disp, "SubmitJob", [_OPS])
    with pytest.raises(errors.MasterFailingOverError):
        _call(disp, "SubmitManyJobs", [[_OPS]])
    assert _call(disp, "QueryClusterInfo", [])            # queries go on
    with pytest.raises(errors.ParameterError, match="within 0..600"):
        _call(disp, "DrainMaster", [-1])
    _call(disp, "DrainMaster", [0])
    assert _call(disp, "SubmitJob", [_OPS]) > last


def test_drain_master_waits_for_a_submission_already_past_its_check(wired):
    """A SubmitJob that passed the guard before the drain hands out its job id
    after it: DrainMaster answers only once that job is written (and its
    replication flushed), and its last job id includes it, so that the
    failover's vote does not find the old master ahead of the taker."""
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    queue = ctx.require_jqueue()
    inside, go_on = threading.Event(), threading.Event()
    real_submit = queue.submit_job

    def slow_submit(ops, **kwargs):
        inside.set()
        assert go_on.wait(10)
        return real_submit(ops, **kwargs)

    queue.submit_job = slow_submit
    submitted: list = []
    drained: list = []
    submitter = threading.Thread(target=lambda: submitted.append(_call(disp, "SubmitJob", [_OPS])))
    submitter.start()
    assert inside.wait(10)                      # past the guard, no job id yet
    drainer = threading.Thread(target=lambda: drained.append(_call(disp, "DrainMaster", [30])))
    drainer.start()
    drainer.join(0.5)
    assert drainer.is_alive() and not drained   # waits for the submission under way
    go_on.set()
    submitter.join(10)
    drainer.join(10)
    assert submitted and drained == [{"last_job_id": submitted[0], "flushed": True}]
    with pytest.raises(errors.MasterFailingOverError):
        _call(disp, "SubmitJob", [_OPS])


def test_no_background_archiving_while_drained_for_a_failover_or_fenced(wired):
    """The queue's archiver asks the guard (doc/protocols/jobs.md, "Queue size")."""
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    may = ctx.jqueue.archiver.may_archive
    assert may() is True
    _call(disp, "DrainMaster", [30])
    assert may() is False
    _call(disp, "DrainMaster", [0])
    assert may() is True
    for name in (node_name(2), node_name(3)):
        rpc.set_failure("master_lease", name, _REFUSAL)
    assert guard.renew() is False
    assert may() is False
