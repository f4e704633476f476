"""OP_NODE_HA_FENCE (ganeti/cmdlib/node_fence.py): the LU against the fake config and RPC."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import errors, locking, mcpu  # noqa: E402
from ganeti.ha import recovery  # noqa: E402
from ganeti.opcodes import node as onode  # noqa: E402

PROGRAM = "/usr/lib/ganeti/oob-test"
N1, N2, N3, N4 = (node_name(k) for k in range(1, 5))


def _setup(tmp_path, *, program: str = PROGRAM):  # type: ignore[no-untyped-def]
    cfg = make_config(tmp_path, nodes=4)
    cluster = cfg.get_cluster_info()
    cluster.ndparams["oob_program"] = program
    cluster.candidate_pool_size = 3
    cfg.update(cluster)
    for k in (1, 2, 3, 4):
        node = cfg.get_node_info_by_name(node_name(k))
        node.master_candidate = k <= 3
        node.powered = True
        cfg.update(node)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def test_an_oob_fence_marks_the_node_offline_then_powers_it_off(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    seen: list[list] = []
    rpc.set_handler("run_oob", lambda node, args: seen.append([node, *args]) or "")
    result, log, _ = run_opcode(ctx, onode.OpNodeHaFence(
        node_name=N3, fence="oob", messages=[f"Node {N3} declared dead: 3 confirmation(s)"]))
    node = cfg.get_node_info_by_name(N3)
    assert node.offline is True and node.master_candidate is False and node.powered is False
    # the pool filled again: node4 promoted in its place
    assert cfg.get_node_info_by_name(N4).master_candidate is True
    assert [entry[:4] for entry in seen] == [[N1, PROGRAM, "power-off", N3]]
    assert result["node"] == N3 and result["fence"] == "oob" and result["confirmed"] > 0
    text = "\n".join(log)
    assert f"Node {N3} declared dead" in text
    assert f"Fence: out-of-band power-off of {N3} ({PROGRAM})" in text
    assert f"{N3} fenced by out-of-band power-off, confirmed at" in text


def test_a_failed_power_off_fails_the_job_and_undoes_the_power_record(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_failure("run_oob", N1, "program exited with status 1")
    with pytest.raises(errors.OpExecError, match=f"power-off of {N3} failed"):
        run_opcode(ctx, onode.OpNodeHaFence(node_name=N3, fence="oob"))
    node = cfg.get_node_info_by_name(N3)
    assert node.powered is True and node.offline is True      # offline stays: it is dead


def test_a_lease_fence_waits_the_lease_out(tmp_path, monkeypatch) -> None:
    cfg, rpc, ctx = _setup(tmp_path, program="")
    waits: list[float] = []

    held: list[set[str]] = []

    def wait(self, timeout: float) -> bool:     # the opcode processor's interruptible sleep
        waits.append(timeout)
        if ctx.glm is not None:
            held.append(set(ctx.glm.list_owned(locking.LEVEL_NODE)))
        return False

    monkeypatch.setattr(mcpu.Processor, "wait_interrupt", wait)
    result, log, _ = run_opcode(ctx, onode.OpNodeHaFence(node_name=N3, fence="lease",
                                                         lease_wait=35.0))
    assert cfg.get_node_info_by_name(N3).offline is True
    assert rpc.calls_to("run_oob") == []
    assert len(waits) == 1 and 34.0 < waits[0] <= 35.0
    # while it waits, it holds the fenced node's lock alone
    assert ctx.glm is not None and held == [{cfg.get_node_info_by_name(N3).uuid}]
    assert result["fence"] == "lease"
    assert f"{N3} fenced by its self-fence lease, confirmed at" in "\n".join(log)


def test_an_oob_fence_of_a_node_without_a_program_or_of_the_master_is_refused(tmp_path) -> None:
    _, _, ctx = _setup(tmp_path, program="")
    with pytest.raises(errors.OpPrereqError, match="has no oob_program"):
        run_opcode(ctx, onode.OpNodeHaFence(node_name=N3, fence="oob"))
    with pytest.raises(errors.OpPrereqError, match="master cannot be fenced"):
        run_opcode(ctx, onode.OpNodeHaFence(node_name=N1, fence="lease"))


def test_a_report_writes_its_lines_and_changes_nothing(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    serial = cfg.get_cluster_info().serial_no
    result, log, _ = run_opcode(ctx, onode.OpNodeHaReport(
        node_name=N3, messages=["Recovery plan of node3:", "recover web1 on node2"]))
    assert result is True and log == ["Recovery plan of node3:", "recover web1 on node2"]
    assert rpc.calls == [] and cfg.get_cluster_info().serial_no == serial
    assert cfg.get_node_info_by_name(N3).offline is False


def test_a_confirmed_fence_is_recorded_on_the_node_until_it_comes_back(tmp_path) -> None:
    """The record a new master resumes the recovery from (doc/ha.md): written once
    the fence is confirmed, replacing an older one; ``gnt-node modify -O no`` drops it."""
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_handler("run_oob", lambda node, args: "")
    node = cfg.get_node_info_by_name(N3)
    node.tags.extend(["ganeti:ha:fenced:lease:1000", "keep-me"])
    cfg.update(node)
    result, _, _ = run_opcode(ctx, onode.OpNodeHaFence(node_name=N3, fence="oob"))
    tags = cfg.get_node_info_by_name(N3).tags
    assert recovery.fenced_record(tags) == ("oob", int(result["confirmed"]))
    assert [t for t in tags if t.startswith(recovery.FENCED_PREFIX)] == [
        recovery.fenced_tag("oob", result["confirmed"])]
    assert "keep-me" in tags
    run_opcode(ctx, onode.OpNodeSetParams(node_name=N3, powered=True))
    run_opcode(ctx, onode.OpNodeSetParams(node_name=N3, offline=False))
    node = cfg.get_node_info_by_name(N3)
    assert node.offline is False and node.tags == ["keep-me"]


def test_a_failed_fence_leaves_no_record(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_failure("run_oob", N1, "program exited with status 1")
    with pytest.raises(errors.OpExecError):
        run_opcode(ctx, onode.OpNodeHaFence(node_name=N3, fence="oob"))
    assert recovery.fenced_record(cfg.get_node_info_by_name(N3).tags) is None
