"""Ganeti 3.0's old-style LUXI queries: QueryInstances, QueryNetworks (doc/protocols/luxi.md)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fakes import make_config  # noqa: E402

from ganeti import luxi, serializer  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import masterd  # noqa: E402


def _call(dispatcher: masterd.LuxiDispatcher, method: str, args: list) -> dict:
    request = luxi.encode_message({"method": method, "args": args})
    return serializer.loads(dispatcher.handle(request[:-len(luxi.ETX)])[:-len(luxi.ETX)])


def test_old_style_instance_and_network_queries(tmp_path) -> None:
    make_config(tmp_path, nodes=2)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE, with_rpc=False)
    try:
        disp = masterd.LuxiDispatcher(ctx)
        assert _call(disp, "QueryInstances", [[], ["name", "status"], False]) == \
            {"success": True, "result": []}
        missing = _call(disp, "QueryInstances", [["nosuch.example.com"], ["name"], False])
        assert missing["success"] is False and "nosuch.example.com" in str(missing["result"])
        assert _call(disp, "QueryNetworks", [None, ["name"], False]) == \
            {"success": True, "result": []}
        net = _call(disp, "QueryNetworks", [["net1"], ["name"], False])
        assert net["success"] is False and "net1" in str(net["result"])
        assert net["result"][0] == "OpPrereqError"
        nodes = _call(disp, "QueryNodes", [None, ["name"], False])["result"]
        assert sorted(r[0] for r in nodes) == ["node1.example.com", "node2.example.com"]
    finally:
        ctx.jqueue.shutdown(timeout=10)
        ctx.replicator.stop(timeout=10)
