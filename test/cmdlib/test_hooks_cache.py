"""HookDirsCache: skip the hooks RPC for nodes without scripts, without missing new ones."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakes import FakeRpc, make_config  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants  # noqa: E402
from ganeti.cmdlib.hooksrunner import HookDirsCache, HooksRunner  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from functools import partial

from fakes.clock import FakeClock

PRE = constants.HOOKS_PHASE_PRE
POST = constants.HOOKS_PHASE_POST


Clock = partial(FakeClock, 100.0, tick=0.001)   # time passes between operations


class FakeOp:
    OP_ID = "OP_TEST_HOOKS"

    def summary(self) -> str:
        return "TEST_HOOKS(x)"


class FakeLU:
    HPATH = "instance-start"
    HTYPE = constants.HTYPE_INSTANCE

    def __init__(self, nodes: list[str]) -> None:
        self.op = FakeOp()
        self.nodes = nodes
        self.hooks_master = None

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"INSTANCE_NAME": "x"}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return self.nodes, self.nodes


def _runner(tmp_path, nodes=3):
    cfg = make_config(tmp_path, nodes=nodes)
    rpc = FakeRpc(cfg)
    listing: dict[str, list[str]] = {}
    rpc.set_handler("hooks_list", lambda node, args: sorted(listing.get(node, [])))
    rpc.set_handler("hooks_runner", lambda node, args: [["10-script", constants.HKR_SUCCESS,
                                                         f"ran on {node}"]])
    clock = Clock()
    paths = Paths(root=str(tmp_path / "root"))
    runner = HooksRunner(cfg, rpc, paths=paths, clock=clock)
    return runner, rpc, listing, clock, paths


def _run(runner, phase=PRE, nodes=None):
    lu = FakeLU(nodes or [node_name(1), node_name(2), node_name(3)])
    return runner.run_hooks(lu, phase)


def test_no_scripts_anywhere_means_no_hooks_rpc(tmp_path) -> None:
    runner, rpc, _, _, _ = _runner(tmp_path)
    lu = FakeLU([node_name(1), node_name(2), node_name(3)])
    assert runner.run_hooks(lu, PRE) == {}
    assert runner.run_hooks(lu, POST) == {}
    assert rpc.calls_to("hooks_runner") == []
    # the master is checked locally, the others asked once for both phases
    assert rpc.calls_to("hooks_list") == [([node_name(2), node_name(3)], [])]


def test_script_added_on_the_master_runs_at_once(tmp_path) -> None:
    runner, rpc, _, _, paths = _runner(tmp_path)
    assert _run(runner, PRE) == {}
    hook_dir = paths.hooks_dir("instance-start", PRE)
    os.makedirs(hook_dir)
    with open(os.path.join(hook_dir, "10-script"), "w") as fh:
        fh.write("#!/bin/sh\n")
    results = _run(runner, PRE)
    assert list(results) == [node_name(1)]
    assert rpc.calls_to("hooks_runner")[-1][0] == [node_name(1)]


def test_script_added_on_another_node_runs_for_the_next_operation(tmp_path) -> None:
    runner, rpc, listing, _, _ = _runner(tmp_path)
    assert _run(runner, PRE) == {}
    listing[node_name(3)] = ["instance-start-pre.d"]
    results = _run(runner, PRE)                       # began after the last answer: asks again
    assert list(results) == [node_name(3)]
    assert results[node_name(3)][0][2] == f"ran on {node_name(3)}"
    assert len(rpc.calls_to("hooks_list")) == 2
    assert _run(runner, POST) == {}                   # other phase: nothing to run


def test_operations_begun_before_a_listing_share_it(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=3)
    rpc = FakeRpc(cfg)
    rpc.set_handler("hooks_list", lambda node, args: [])
    clock = Clock()
    cache = HookDirsCache(rpc, clock=clock)
    since = clock()
    assert cache.nodes_to_run([node_name(2)], "node-add", PRE, since=since) == []
    assert cache.nodes_to_run([node_name(2)], "node-add", POST, since=since) == []
    assert len(rpc.calls_to("hooks_list")) == 1
    later = clock()
    assert cache.nodes_to_run([node_name(2)], "node-add", PRE, since=later) == []
    assert len(rpc.calls_to("hooks_list")) == 2


def test_concurrent_operations_wait_for_one_shared_listing(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=4)
    rpc = FakeRpc(cfg)
    entered = threading.Event()
    release = threading.Event()
    first = [True]

    def slow_list(node: str, args: list[Any]) -> list[str]:
        if first[0]:
            first[0] = False
            entered.set()
            assert release.wait(20)
        return []

    rpc.set_handler("hooks_list", slow_list)
    cache = HookDirsCache(rpc)
    out: list[list[str]] = []
    a = threading.Thread(target=lambda: out.append(
        cache.nodes_to_run([node_name(2)], "node-add", PRE)))
    a.start()
    assert entered.wait(10)
    others = [threading.Thread(target=lambda n=n: out.append(
        cache.nodes_to_run([node_name(n)], "node-add", PRE))) for n in (2, 3, 4, 3)]
    for t in others:
        t.start()
    time.sleep(0.2)                                   # all four wait behind the first listing
    release.set()
    for t in [a, *others]:
        t.join(10)
    assert out == [[]] * 5
    calls = rpc.calls_to("hooks_list")
    assert len(calls) == 2                            # the first, then ONE for all waiters
    assert calls[1][0] == [node_name(2), node_name(3), node_name(4)]


def test_invalidate_makes_the_next_check_ask(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=2)
    rpc = FakeRpc(cfg)
    rpc.set_handler("hooks_list", lambda node, args: [])
    cache = HookDirsCache(rpc, clock=lambda: 5.0)    # frozen clock: answers stay valid
    cache.nodes_to_run([node_name(2)], "node-add", PRE)
    cache.nodes_to_run([node_name(2)], "node-add", PRE)
    assert len(rpc.calls_to("hooks_list")) == 1
    cache.invalidate(node_name(2))
    cache.nodes_to_run([node_name(2)], "node-add", PRE)
    assert len(rpc.calls_to("hooks_list")) == 2


def test_unanswered_listing_falls_back_to_running_the_hooks(tmp_path) -> None:
    runner, rpc, _, _, _ = _runner(tmp_path)
    rpc.set_failure("hooks_list", node_name(2), "connection refused")
    rpc.set_failure("hooks_runner", node_name(2), "connection refused")
    assert _run(runner, PRE) == {}                    # unreachable is not a deny
    assert [nodes for nodes, _ in rpc.calls_to("hooks_runner")] == [[node_name(2)]]


def test_env_of_skipped_pre_phase_is_kept_for_post(tmp_path) -> None:
    """Post hooks see the pre-Exec environment even when the pre RPC was skipped."""
    runner, rpc, listing, clock, _ = _runner(tmp_path)
    state = {"v": "before"}
    lu = FakeLU([node_name(2)])
    lu.BuildHooksEnv = lambda: {"STATE": state["v"]}  # type: ignore[method-assign]
    runner.run_hooks(lu, PRE)                         # no scripts: no hooks RPC
    state["v"] = "after"
    listing[node_name(2)] = ["instance-start-post.d"]
    runner.dirs_cache.invalidate()
    runner.run_hooks(lu, POST)
    (nodes, args), = rpc.calls_to("hooks_runner")
    env = args[2]
    assert env["GANETI_STATE"] == "before" and env["GANETI_POST_STATE"] == "after"


class FakeProc:
    """The processor of a job received at wall-clock ``submitted``."""

    def __init__(self, submitted: float | None) -> None:
        self.submitted = submitted

    def job_submitted_at(self) -> float | None:
        return self.submitted


def _job_lu(submitted: float | None) -> FakeLU:
    lu = FakeLU([node_name(1), node_name(2), node_name(3)])
    lu.proc = FakeProc(submitted)
    return lu


def test_jobs_submitted_before_a_listing_share_it(tmp_path) -> None:
    runner, rpc, listing, clock, _ = _runner(tmp_path)
    wall = [1000.0]
    runner.wall_clock = lambda: wall[0]
    # two jobs queued at wall time 1000, run at 1005 and 1006
    wall[0] = 1005.0
    assert runner.run_hooks(_job_lu(1000.0), PRE) == {}
    assert len(rpc.calls_to("hooks_list")) == 1
    listing[node_name(3)] = ["instance-start-pre.d"]   # added after they were submitted
    wall[0] = 1006.0
    assert runner.run_hooks(_job_lu(1000.0), PRE) == {}  # may be missed: no new listing
    assert len(rpc.calls_to("hooks_list")) == 1
    # a job submitted after the script was added always runs it
    clock()
    wall[0] = 1007.0
    results = runner.run_hooks(_job_lu(1007.0), PRE)
    assert list(results) == [node_name(3)]
    assert len(rpc.calls_to("hooks_list")) == 2


def test_wall_clock_set_back_means_asking_again(tmp_path) -> None:
    runner, rpc, _, _, _ = _runner(tmp_path)
    runner.wall_clock = lambda: 500.0                   # before the submission time
    assert runner.run_hooks(_job_lu(1000.0), PRE) == {}
    assert runner.run_hooks(_job_lu(1000.0), PRE) == {}
    assert len(rpc.calls_to("hooks_list")) == 2         # strict: "since" is now each time


def test_processor_reports_the_job_submission_time() -> None:
    from ganeti.jqueue.callbacks import OpCallbacks
    from ganeti.jqueue.job import QueuedJob
    from ganeti.mcpu import Processor

    class Ctx:
        pass
    proc = Processor(Ctx())
    assert proc.job_submitted_at() is None               # outside a job
    job = QueuedJob.__new__(QueuedJob)
    job.received_timestamp = [1000, 250000]
    proc._cbs = OpCallbacks(None, job, 0)  # type: ignore[arg-type]
    assert proc.job_submitted_at() == 1000.25
