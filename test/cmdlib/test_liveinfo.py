"""NodeInfoCache and the node query's use of it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakes import FakeRpc, make_config  # noqa: E402

from ganeti.cmdlib import node as cmdnode  # noqa: E402
from ganeti.cmdlib.liveinfo import NodeInfoCache  # noqa: E402
from ganeti.context import MasterContext  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from functools import partial

from fakes.clock import FakeClock


Clock = partial(FakeClock, 100.0)


def test_answers_are_reused_until_max_age() -> None:
    clock = Clock()
    cache = NodeInfoCache(5.0, clock=clock)
    fresh, missing, started = cache.lookup(["a", "b"])
    assert fresh == {} and missing == ["a", "b"]
    cache.store(started, {"a": {"memory_free": 1}})      # b did not answer: not stored
    clock.now += 4.0
    fresh, missing, _ = cache.lookup(["a", "b"])
    assert fresh == {"a": {"memory_free": 1}} and missing == ["b"]
    clock.now += 1.5                                       # 5.5 s after the call started
    fresh, missing, _ = cache.lookup(["a"])
    assert fresh == {} and missing == ["a"]


def test_invalidation_wins_over_a_racing_call() -> None:
    clock = Clock()
    cache = NodeInfoCache(5.0, clock=clock)
    _, _, started = cache.lookup(["a", "b"])               # a listing starts ...
    clock.now += 0.1
    cache.invalidate(["a"])                                # ... an operation on a ends ...
    clock.now += 0.1
    cache.store(started, {"a": {"x": "before"}, "b": {"x": "b"}})   # ... the answers arrive
    fresh, missing, _ = cache.lookup(["a", "b"])
    assert missing == ["a"] and fresh == {"b": {"x": "b"}}
    cache.invalidate(None)
    assert cache.lookup(["b"])[1] == ["b"]


def test_max_age_zero_never_reuses() -> None:
    cache = NodeInfoCache(0.0, clock=Clock())
    _, _, started = cache.lookup(["a"])
    cache.store(started, {"a": {}})
    assert cache.lookup(["a"])[1] == ["a"]


def test_collect_live_asks_only_the_nodes_without_a_fresh_answer(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=3)
    rpc = FakeRpc(cfg)
    clock = Clock()
    ctx = MasterContext(paths=Paths(root=str(tmp_path)), cfg=cfg, rpc=rpc,
                        node_info_cache=NodeInfoCache(5.0, clock=clock))
    nodes = sorted(cfg.get_all_nodes_info().values(), key=lambda n: n.name)
    first = cmdnode.collect_live(ctx, nodes)
    assert len(first) == 3 and len(rpc.calls_to("node_info")) == 1
    assert cmdnode.collect_live(ctx, nodes) == first
    assert len(rpc.calls_to("node_info")) == 1             # all served from the cache
    ctx.node_info_cache.invalidate([nodes[1].uuid])
    again = cmdnode.collect_live(ctx, nodes)
    assert again.keys() == first.keys()
    (asked, _), = rpc.calls_to("node_info")[1:]
    assert asked == [nodes[1].name]                        # only the invalidated node
    ctx.node_info_cache = None                             # no cache: always ask everyone
    cmdnode.collect_live(ctx, nodes)
    assert rpc.calls_to("node_info")[-1][0] == [n.name for n in nodes]
