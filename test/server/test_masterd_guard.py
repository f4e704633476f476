"""The master daemon's lease and fencing as wired by build_context (fake RPC, fake clock)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_config  # noqa: E402
from fakes.clock import FakeClock  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import errors, luxi, opcodes  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import masterd  # noqa: E402


@pytest.fixture
def wired(tmp_path, monkeypatch):
    make_config(tmp_path, nodes=3)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    fake: list[FakeRpc] = []

    def build_rpc(cfg, paths, *args):
        fake.append(FakeRpc(cfg))
        return fake[0]

    monkeypatch.setattr(masterd, "_build_rpc", build_rpc)
    monkeypatch.setenv("GANETI_HOSTNAME", node_name(1))
    checks: list = []
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE,
                                write_checks=checks)
    rpc = fake[0]
    rpc.set_handler("master_lease", lambda node, args: {"master": node_name(1), "epoch": 0})
    clock = FakeClock()
    opts = argparse.Namespace(lease_duration=6.0, rpc_timeout_scale=1.0, no_voting=False)
    guard = masterd._guard(ctx, opts, checks, clock=clock)
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


def test_fenced_master_refuses_jobs_and_writes(wired):
    ctx, rpc, clock, guard = wired
    disp = masterd.LuxiDispatcher(ctx, guard=guard)
    frame = luxi.encode_request("SubmitJob", [[opcodes.to_dict(opcodes.OpTestDelay(duration=0))]],
                                None).rstrip(b"\x03")

    def submit():
        return luxi.parse_response(disp.handle(frame).rstrip(b"\x03"))

    assert submit() > 0
    # a node refuses our epoch (as the RPC runner reports it)
    ctx.rpc.on_fenced(node_name(2), "Fenced: master epoch 0 (from node1) is older than epoch 1")
    with pytest.raises(errors.NotMasterError, match="no longer the master: node node2"):
        submit()
    with pytest.raises(errors.ConfigurationError, match="no longer the master"):
        ctx.cfg.update(ctx.cfg.get_cluster_info())
