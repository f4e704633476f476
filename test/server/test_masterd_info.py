"""QueryClusterInfo is answered from a cached frame that follows every config change."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fakes import make_config  # noqa: E402

from ganeti import luxi, serializer  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import masterd  # noqa: E402


def _info(dispatcher: masterd.LuxiDispatcher) -> tuple[bytes, dict]:
    request = luxi.encode_message({"method": "QueryClusterInfo", "args": []})
    frame = dispatcher.handle(request[:-len(luxi.ETX)])
    msg = serializer.loads(frame[:-len(luxi.ETX)])
    assert msg["success"] is True
    return frame, msg["result"]


def test_cluster_info_frame_is_reused_until_the_config_changes(tmp_path) -> None:
    make_config(tmp_path, nodes=2)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE, with_rpc=False)
    try:
        dispatcher = masterd.LuxiDispatcher(ctx)
        first, info = _info(dispatcher)
        again, _ = _info(dispatcher)
        assert again is first                       # the cached frame itself
        cluster = ctx.cfg.get_cluster_info()
        cluster.tags.append("scale")
        ctx.cfg.update(cluster)
        changed, info2 = _info(dispatcher)
        assert changed is not first and info2["tags"] == sorted(info["tags"] + ["scale"])
        node = ctx.cfg.get_node_info_by_name(ctx.cfg.get_master_node_name())
        node.tags.append("x")
        ctx.cfg.update(node)                        # a change elsewhere: a new serial
        rebuilt, info3 = _info(dispatcher)
        assert rebuilt is not changed and info3 == info2
    finally:
        ctx.jqueue.shutdown(timeout=10)
        ctx.replicator.stop(timeout=10)
