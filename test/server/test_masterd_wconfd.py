"""Ganeti's WConfd calls served by the master (``gnt-debug wconfd``): Echo,
FlushConfig, ListLocks, ListAllLocks, ListAllLocksOwners, CleanupLocks."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fakes import make_config  # noqa: E402

from ganeti import locking, luxi, serializer  # noqa: E402
from ganeti.context import MasterContext  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import masterd  # noqa: E402



def _call(dispatcher: masterd.LuxiDispatcher, method: str, args: list) -> dict:
    request = luxi.encode_message({"method": method, "args": args})
    return serializer.loads(dispatcher.handle(request[:-len(luxi.ETX)])[:-len(luxi.ETX)])


def _ok(dispatcher: masterd.LuxiDispatcher, method: str, *args: object) -> object:
    answer = _call(dispatcher, method, list(args))
    assert answer["success"], answer
    return answer["result"]


@pytest.fixture
def master(tmp_path) -> Iterator[tuple[MasterContext, masterd.LuxiDispatcher]]:
    make_config(tmp_path, nodes=2)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE, with_rpc=False)
    try:
        yield ctx, masterd.LuxiDispatcher(ctx)
    finally:
        ctx.jqueue.shutdown(timeout=10)
        ctx.replicator.stop(timeout=10)


def _node1(ctx: MasterContext) -> str:
    """node1's lock name (node locks are by UUID, as Ganeti's)."""
    return ctx.require_cfg().get_node_info_by_name("node1.example.com").uuid


def _hold(ctx: MasterContext, name: str, shared: bool) -> tuple[threading.Thread, threading.Event]:
    """A thread called ``name`` holding the BGL (shared) and node1 (in the mode asked)."""
    held, done = threading.Event(), threading.Event()
    glm = ctx.glm
    assert glm is not None

    node = _node1(ctx)

    def body() -> None:
        glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
        glm.acquire(locking.LEVEL_NODE, [node], shared=shared)
        held.set()
        done.wait(10)   # ends without releasing when told to
    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    assert held.wait(10)
    return thread, done


def test_echo_returns_its_argument(master) -> None:
    assert _ok(master[1], "Echo", "hello world") == "hello world"


def test_flushconfig_writes_the_config_file_and_returns_its_serial(master) -> None:
    ctx, disp = master
    path = ctx.paths.config_file
    before = serializer.loads(open(path, "rb").read())
    os.utime(path, (0, 0))
    serial = _ok(disp, "FlushConfig")
    after = serializer.loads(open(path, "rb").read())
    assert serial == after["serial_no"] == before["serial_no"] + 1
    assert os.stat(path).st_mtime > 0
    # the objects are the same; only the document's serial and time moved on
    assert after["nodes"] == before["nodes"] and after["cluster"] == before["cluster"]
    assert ctx.replicator.replicated_serial() >= serial


def test_lock_lists_name_jobs_by_id(master) -> None:
    ctx, disp = master
    node = f"node/{_node1(ctx)}"
    thread, done = _hold(ctx, "job/7", shared=False)
    try:
        assert _ok(disp, "ListLocks", 7) == [["cluster/BGL", "shared"],
                                              [node, "exclusive"]]
        assert _ok(disp, "ListLocks", "8") == []
        assert _ok(disp, "ListAllLocks") == ["cluster/BGL", node]
        assert _ok(disp, "ListAllLocksOwners") == [
            ["cluster/BGL", [[7, "shared"]]], [node, [[7, "exclusive"]]]]
        assert _call(disp, "ListLocks", ["x"])["success"] is False
    finally:
        done.set()
        thread.join(10)


def test_cleanuplocks_releases_the_locks_of_ended_threads_only(master) -> None:
    ctx, disp = master
    node = f"node/{_node1(ctx)}"
    live, keep = _hold(ctx, "job/3", shared=True)
    dead, end = _hold(ctx, "job/4", shared=True)
    end.set()
    dead.join(10)
    try:
        freed = _ok(disp, "CleanupLocks")
        assert sorted(freed) == sorted([["cluster/BGL", "job/4"], [node, "job/4"],
                                        ["node/[lockset]", "job/4"],
                                        ["cluster/[lockset]", "job/4"]])
        assert _ok(disp, "ListAllLocksOwners") == [
            ["cluster/BGL", [[3, "shared"]]], [node, [[3, "shared"]]]]
        assert _ok(disp, "CleanupLocks") == []
    finally:
        keep.set()
        live.join(10)
