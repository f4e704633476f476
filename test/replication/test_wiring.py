"""Replication as wired by the master daemon: ConfigWriter, JobStorage, processor, masterd."""

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

from fakes import FakeRpc, GatedWriter, make_config  # noqa: E402
from fakes.fakeconfig import make_cluster_context, node_name  # noqa: E402

from ganeti.utils.payload import decode_payload
from ganeti import opcodes, serializer, ssconf  # noqa: E402
from ganeti.config import file as configfile  # noqa: E402
from ganeti.cmdlib import test as cmdlib_test  # noqa: E402
from ganeti.cmdlib.hooksrunner import HooksRunner  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.mcpu import NullCallbacks, Processor  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.replication import Replicator  # noqa: E402
from ganeti.server import mastercontext, masterd  # noqa: E402


def _replicating_config(tmp_path, **kw):
    cfg = make_config(tmp_path, **kw)
    paths = Paths(root=str(tmp_path / "root"))
    rpc = FakeRpc(cfg)
    rep = Replicator(paths, rpc)
    rep.refresh_targets(cfg)
    cfg._on_change = lambda data, serial: rep.on_config_change(cfg, data, serial)  # as masterd
    return cfg, rpc, rep, paths


class Gate:
    """An RPC handler that blocks its first call until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, node: str, args: list[Any]) -> Any:
        self.entered.set()
        assert self.release.wait(20), "gate never released"
        return None


def _tag(cfg, tag: str) -> int:
    node = cfg.get_node_info_by_name(node_name(2))
    node.tags.append(tag)
    cfg.update(node)
    return cfg.get_serial_no()


def test_config_goes_to_candidates_and_ssconf_to_all_nodes(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=5, candidates=3, offline=(5,))
    node = cfg.get_node_info_by_name(node_name(4))
    node.tags.append("x")
    cfg.update(node)
    assert rep.wait_replicated(cfg.get_serial_no(), timeout=10)
    # candidates: one replicate_state each with the config and the ssconf values
    (nodes, (config, values, queue_files)), = rpc.calls_to("replicate_state")
    assert nodes == [node_name(2), node_name(3)]          # candidates, not the master
    assert config[0] == "/var/lib/ganeti/config.data"
    with open(paths.config_file, encoding="utf-8") as fh:
        assert decode_payload(config[1]).decode() == fh.read()  # exactly the bytes written
    assert values["master_node"] == node_name(1) and queue_files == []
    assert rpc.calls_to("upload_file") == []
    # the other online nodes: ssconf only
    (nodes, args), = rpc.calls_to("write_ssconf_files")
    assert nodes == [node_name(4)] and args == [values]
    assert ("write_ssconf_files", node_name(5)) not in rpc.offline_skipped
    assert ssconf.SimpleStore(paths).get_master_node() == node_name(1)   # local too


def test_unchanged_ssconf_is_not_resent(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=3)
    node = cfg.get_node_info_by_name(node_name(2))
    node.tags.append("a")
    cfg.update(node)
    assert rep.flush(timeout=10)
    node.tags.append("b")
    cfg.update(node)
    assert rep.flush(timeout=10)
    first, second = rpc.calls_to("replicate_state")
    assert first[1][1] is not None and first[1][1]["master_node"] == node_name(1)
    assert second[1][1] is None                           # ssconf unchanged: not resent
    assert first[1][0][1] != second[1][0][1]              # each push has its config bytes


def test_single_node_cluster_makes_no_rpc(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=1)
    cfg.update(cfg.get_cluster_info())
    assert rep.wait_replicated(cfg.get_serial_no(), timeout=10)
    assert rpc.calls == []


def test_job_files_go_to_candidates_only(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=4, candidates=2)
    os.makedirs(paths.queue_dir, exist_ok=True)
    storage = jstorage.JobStorage(paths, sync_mode=jstorage.SYNC_NONE,
                                  replicate=rep.replicate_job_file,
                                  replicate_renames=rep.replicate_renames,
                                  replicate_batch=rep.replicate_job_files)
    storage.open()
    try:
        (job_id,) = storage.allocate_ids(1)
        storage.write_jobs([(job_id, b'{"id": 1}')], serial=True)
        storage.close()
    finally:
        storage.close()
    assert rep.flush(timeout=10)
    updates = rpc.calls_to("jobqueue_update_many")
    assert updates and all(nodes == [node_name(2)] for nodes, _ in updates)
    sent = [entry for _, (files,) in updates for entry in files]
    assert ["/var/lib/ganeti/queue/job-1", '{"id": 1}'] in sent
    assert ["/var/lib/ganeti/queue/serial", "1\n"] in sent      # same commit, same RPC
    assert rpc.calls_to("jobqueue_update") == []


def test_job_files_are_sent_in_a_request_of_their_own(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=3, candidates=2)
    rep.replicate_job_files({os.path.join(paths.queue_dir, "job-8"): b"{}"})
    assert rep.flush(timeout=10)
    (nodes, (files,)), = rpc.calls_to("jobqueue_update_many")
    assert nodes == [node_name(2)] and files == [["/var/lib/ganeti/queue/job-8", "{}"]]
    assert rpc.calls_to("replicate_state") == []


def test_a_missed_quorum_is_logged_as_error(tmp_path, caplog) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=4)
    rpc.set_failure("jobqueue_update", node_name(2), "down")
    rpc.set_failure("jobqueue_update_many", node_name(2), "down")
    with caplog.at_level(logging.WARNING):
        rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"{}")
        assert rep.flush(timeout=10)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    caplog.clear()
    rpc.set_failure("jobqueue_update_many", node_name(3), "down")
    with caplog.at_level(logging.WARNING):
        rep.replicate_job_file(os.path.join(paths.queue_dir, "job-1"), b"{}")
        assert rep.flush(timeout=10)
    # a warning per failing node, and an error: the file is on 2 of 4 candidates
    assert sorted(r.levelno for r in caplog.records) == [logging.WARNING, logging.WARNING,
                                                        logging.ERROR]


def test_processor_waits_for_replication_before_success(tmp_path, monkeypatch) -> None:
    cfg, rpc, rep, _ = _replicating_config(tmp_path, nodes=3)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    ctx.replicator = rep
    gate = Gate()
    rpc.set_handler("replicate_state", gate)
    produced: list[int] = []

    def exec_changing_config(self: Any, feedback_fn: Any) -> Any:
        produced.append(_tag(self.cfg, "from-exec"))
        return "done"

    monkeypatch.setattr(cmdlib_test.LUTestDelay, "Exec", exec_changing_config)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(
        Processor(ctx, timeouts=[1.0]).execute_opcode(opcodes.OpTestDelay(duration=0),
                                                      NullCallbacks())))
    worker.start()
    try:
        assert gate.entered.wait(10)
        worker.join(0.3)
        assert worker.is_alive() and result == []     # not reported while unreplicated
    finally:
        gate.release.set()
    worker.join(10)
    assert result == ["done"]
    assert rep.replicated_serial() >= produced[0]
    rep.stop(timeout=5)


def test_processor_does_not_wait_for_read_only_opcodes(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=2)

    class Spy:
        calls: list[int] = []

        def wait_replicated(self, serial: int, timeout: float | None = None) -> bool:
            self.calls.append(serial)
            return False

    ctx = make_cluster_context(tmp_path, cfg, FakeRpc(cfg))
    ctx.replicator = Spy()
    cbs = NullCallbacks()
    Processor(ctx, timeouts=[1.0]).execute_opcode(opcodes.OpTestDelay(duration=0), cbs)
    assert Spy.calls == []


def test_processor_warns_when_replication_times_out(tmp_path, monkeypatch, caplog) -> None:
    cfg = make_config(tmp_path, nodes=2)

    class Late:
        def wait_replicated(self, serial: int, timeout: float | None = None) -> bool:
            return False

    ctx = make_cluster_context(tmp_path, cfg, FakeRpc(cfg))
    ctx.replicator = Late()
    monkeypatch.setattr(cmdlib_test.LUTestDelay, "Exec",
                        lambda self, fb: _tag(self.cfg, "x") and None)
    cbs = NullCallbacks()
    with caplog.at_level(logging.ERROR):
        assert Processor(ctx, timeouts=[1.0]).execute_opcode(
            opcodes.OpTestDelay(duration=0), cbs) is None
    assert any("not replicated" in r.getMessage() for r in caplog.records)
    assert any("could not be confirmed" in str(m) for _, m in cbs.messages)


def test_group_committed_config_replicates_in_serial_order(tmp_path) -> None:
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=3)
    queued: list[int] = []
    inner = cfg._on_change

    def on_change(data: bytes, serial: int) -> None:
        assert serializer.loads(data)["serial_no"] == serial
        queued.append(serial)
        inner(data, serial)

    cfg._on_change = on_change
    problems: list[str] = []

    def worker(k: int) -> None:
        for i in range(5):
            _tag(cfg, f"t{k}-{i}")
            mine = cfg.last_saved_serial()
            if not rep.wait_replicated(mine, timeout=20):
                problems.append(f"serial {mine} not replicated")
            elif rep.replicated_serial() < mine:
                problems.append(f"serial {mine} reported before its push")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    assert not any(t.is_alive() for t in threads) and not problems
    assert queued == sorted(set(queued)) and queued[-1] == cfg.get_serial_no()
    assert rep.wait_replicated(cfg.get_serial_no(), timeout=10)
    with open(paths.config_file, encoding="utf-8") as fh:
        assert decode_payload(rpc.calls_to("replicate_state")[-1][1][0][1]).decode() == fh.read()
    rep.stop(timeout=10)


def test_build_context_wires_replication_and_hooks(tmp_path, monkeypatch) -> None:
    make_config(tmp_path, nodes=3)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    fake: list[FakeRpc] = []

    def build_rpc(cfg, paths, *args):
        fake.append(FakeRpc(cfg))
        return fake[0]

    monkeypatch.setattr(mastercontext, "_build_rpc", build_rpc)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE)
    try:
        assert isinstance(ctx.hooks_runner, HooksRunner)
        ctx.cfg.update(ctx.cfg.get_cluster_info())
        assert ctx.replicator.wait_replicated(ctx.cfg.get_serial_no(), timeout=10)
        assert fake[0].nodes_called("replicate_state") == {node_name(2), node_name(3)}
        ctx.jqueue.start()
        job_id = ctx.jqueue.submit_job([opcodes.to_dict(opcodes.OpTestDelay(duration=0))])
        ctx.jqueue.wait_for_job_change(job_id, ["status"], None, None, 5.0)
    finally:
        ctx.jqueue.shutdown(timeout=10)
        assert ctx.replicator.stop(timeout=10)
    assert fake[0].nodes_called("jobqueue_update_many") == {node_name(2), node_name(3)}
    assert dispatcher_rows(ctx)[0][0] == node_name(1)


def dispatcher_rows(ctx):
    """Old-style QueryNodes through the LUXI dispatcher."""
    from ganeti import luxi
    disp = masterd.LuxiDispatcher(ctx)
    frame = luxi.encode_request("QueryNodes", [[], ["name", "role"], False])
    reply = disp.handle(frame.rstrip(b"\x03"))
    resp = luxi.parse_response(reply.rstrip(b"\x03"))
    return resp


@pytest.mark.integration  # starts a daemon
def test_real_node_daemons_replication_verify_and_node_ops(tmp_path, monkeypatch) -> None:
    """build_context with real RPC against 3 real node daemons (no --no-rpc)."""
    import noded_harness

    from fakes.fakeconfig import run_opcode

    from ganeti import constants
    from ganeti.opcodes import cluster as ocluster
    from ganeti.opcodes import node as onode

    with noded_harness.NodedCluster(tmp_path / "vc", 3) as vc:
        monkeypatch.setenv(constants.ENV_NODED_PORT, str(vc.port))
        root = vc.node(node_name(1)).paths.root
        make_config(tmp_path, nodes=3, candidates=2, root=root)
        paths = Paths(root=root)
        ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE)
        try:
            assert ctx.rpc is not None and ctx.hooks_runner is not None
            run_opcode(ctx, ocluster.OpClusterRedistConf())
            master_cfg = Path(paths.config_file).read_bytes()
            cand = Paths(root=vc.node(node_name(2)).paths.root)
            assert Path(cand.config_file).read_bytes() == master_cfg
            regular = Paths(root=vc.node(node_name(3)).paths.root)
            assert not os.path.exists(regular.config_file)
            assert ssconf.SimpleStore(regular).get_master_node() == node_name(1)
            result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyGroup(
                group_name="default", error_codes=True))
            assert result is True, msgs
            # promote node3: it gets the config; then tamper with it and verify again
            run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3), master_candidate=True))
            assert Path(regular.config_file).read_bytes() == Path(paths.config_file).read_bytes()
            Path(regular.config_file).write_text("{}")
            result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyGroup(
                group_name="default", error_codes=True))
            assert result is False
            assert any("ECLUSTERFILECHECK" in m and node_name(3) in m for m in msgs), msgs
            res = ctx.rpc.call_version([node_name(2)])[node_name(2)]
            assert res.payload == constants.PROTOCOL_VERSION
        finally:
            ctx.jqueue.shutdown(timeout=10)
            ctx.replicator.stop(timeout=10)


def test_ssconf_pushed_with_a_config_is_computed_from_exactly_that_config(tmp_path) -> None:
    """Grouped writes: the working config is one change ahead when a write lands.

    The write of the first change is held; a second change (cluster tags,
    an ssconf value) is queued behind it.  The push of the first serial
    must carry that serial's ssconf values (no new tag), locally and on
    the wire; the second push carries the tag.
    """
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=3, candidates=2)
    gate = GatedWriter(timeout=20)
    cfg._write_fn = gate
    first_serial = cfg.get_serial_no() + 1
    gate.arm(2)         # hold both writes, each until its own open()
    done: list[int] = []
    first = threading.Thread(target=lambda: done.append(_tag(cfg, "not-in-ssconf")), daemon=True)
    first.start()
    gate.wait_held(1)
    cluster = cfg.get_cluster_info()
    cluster.tags.append("second")
    second = threading.Thread(target=lambda: done.append(cfg.update(cluster) or 0), daemon=True)
    second.start()
    deadline = time.monotonic() + 20
    while cfg.get_serial_no() < first_serial + 1:       # queued behind the held write
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gate.open()         # the first write lands (carrying only the first change)
    first.join(20)
    gate.wait_held(2)   # the second write waits: the first push is all there is
    assert rep.wait_replicated(first_serial, timeout=10) and rep.flush(timeout=10)
    pushes = rpc.calls_to("replicate_state")
    assert pushes
    for _, (config, values, _) in pushes:
        pushed = serializer.loads(decode_payload(config[1]))
        assert pushed["serial_no"] == first_serial and "second" not in pushed["cluster"]["tags"]
        assert values is None or values["cluster_tags"] == ""
    assert ssconf.SimpleStore(paths).read_lines("cluster_tags") == []
    gate.open()
    second.join(20)
    assert len(done) == 2
    assert rep.wait_replicated(first_serial + 1, timeout=10) and rep.flush(timeout=10)
    _, (config, values, _) = rpc.calls_to("replicate_state")[-1]
    assert serializer.loads(decode_payload(config[1]))["serial_no"] == first_serial + 1
    assert values is not None and values["cluster_tags"] == "second"
    assert ssconf.SimpleStore(paths).read_lines("cluster_tags") == ["second"]
    for _, (config, values, _) in rpc.calls_to("replicate_state"):
        if values is not None:
            assert values == ssconf.compute_ssconf_values(configfile.decode_config(
                decode_payload(config[1])))
    rep.stop(timeout=5)


def test_redistribute_writes_config_and_ssconf_between_pushes(tmp_path) -> None:
    """``gnt-cluster redist-conf`` and friends push the config file and ssconf
    themselves: they wait for a push under way, and a push queued meanwhile
    goes after them, so a node never keeps older bytes (a watcher test saw a
    node left with the config before the last one, doc/design/replication.md,
    "Redistribution")."""
    from ganeti.cmdlib.common import redistribute
    cfg, rpc, rep, paths = _replicating_config(tmp_path, nodes=3)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    ctx.replicator = rep
    order: list[str] = []
    gate = Gate()

    def push(node: str, args: list[Any]) -> Any:
        order.append("push")
        return gate(node, args)

    def upload(node: str, args: list[Any]) -> Any:
        order.append("upload " + os.path.basename(args[0]))
        return None

    rpc.set_handler("replicate_state", push)
    rpc.set_handler("upload_file", upload)
    rpc.set_handler("write_ssconf_files", lambda node, args: order.append("ssconf"))
    _tag(cfg, "a")
    assert gate.entered.wait(10)                      # a push in flight
    done: list[list[str]] = []
    worker = threading.Thread(target=lambda: done.append(redistribute(ctx)))
    worker.start()
    try:
        time.sleep(0.3)
        assert "upload config.data" not in order and "ssconf" not in order
    finally:
        gate.release.set()
        worker.join(20)
    assert done == [[]]
    first_upload = order.index("upload config.data")
    assert order[:first_upload].count("push") == 2    # both candidates' pushes came first
    assert "ssconf" in order[first_upload:]
    rep.stop(timeout=10)


def test_redistribute_reports_every_node_failed_when_the_lane_stays_busy(tmp_path) -> None:
    """A lane that does not come free in time is a failed redistribution (the
    callers say to run redist-conf again), not an error after e.g. a node add."""
    from contextlib import contextmanager

    from ganeti import errors
    from ganeti.cmdlib.common import redistribute
    cfg, rpc, rep, _ = _replicating_config(tmp_path, nodes=3)
    ctx = make_cluster_context(tmp_path, cfg, rpc)

    class Busy:
        @contextmanager
        def config_lane(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
            raise errors.OpExecError("The configuration replication was busy for 35s")
            yield

    ctx.replicator = Busy()  # type: ignore[assignment]
    said: list[str] = []
    assert redistribute(ctx, said.append) == [node_name(2), node_name(3)]
    assert any("not redistributed" in line for line in said)
    assert not rpc.calls_to("write_ssconf_files")
    rep.stop(timeout=5)
