"""The OS image store on the master candidates (doc/images.md, "Replication").

Each online master candidate keeps a copy of every store image, in its node
cache (``<data dir>/os-image-cache/<sha256>``, the same copies installs use),
and the store's index.  A candidate that takes the master role over has both:
:func:`ganeti.cmdlib.os_image_store.stored_file` finds an image's bytes in its
cache when its own ``images/<name>`` is not there.  The bytes go first, the
index after them, so an index never names an image its node lacks because the
copy was still on its way.  A candidate that cannot be reached, or fails, is a
warning: the store on the master is not undone (``gnt-cluster redist-conf``
sends what is missing later).
"""

from __future__ import annotations

import os
from typing import Any

from ganeti import errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import os_image_store
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import upload_files
from ganeti.cmdlib.os_image import drop_staged, push_image

__all__ = ["candidates", "replicate_image", "replicate_store", "send_index"]


def candidates(lu: LogicalUnit[Any]) -> list[str]:
    """The online master candidates other than the master, by name."""
    cfg = lu.context.committed_cfg()
    master = cfg.get_master_node()
    return sorted(n.name for n in cfg.get_all_nodes_info().values()
                  if n.master_candidate and not n.offline and n.uuid != master)


def _staging_key(sha: str) -> str:
    """The name the node stages a replica under (a host name, as an instance's)."""
    return f"os-image-store-{sha[:16]}"


def replicate_image(lu: LogicalUnit[Any], node: str, name: str, entry: dict[str, Any],
                    feedback_fn: FeedbackFn) -> bool:
    """Give ``node`` a checked cached copy of store image ``name``; False when it
    already had one (nothing sent).  Raises on failure; nothing is left staged."""
    rpc = lu.require_rpc()
    sha = str(entry["sha256"])
    key = _staging_key(sha)
    try:
        if rpc.call_os_image_cache_stage(node, instance_name=key, sha256=sha).one(
                node, f"Could not look up the cached OS image on {node}"):
            return False
        push_image(lu, node, key, name,
                   os_image_store.stored_file(lu.context.paths, name, entry), feedback_fn)
        facts = rpc.call_os_image_inspect(node, instance_name=key).one(
            node, f"Could not inspect the copy of OS image {name} on {node}")
        if facts["sha256"] != sha:
            raise errors.OpExecError(f"OS image {name} on {node}: checksum mismatch (expected"
                                     f" sha256:{sha}, got sha256:{facts['sha256']})")
        rpc.call_os_image_cache_keep(node, instance_name=key, sha256=sha).one(
            node, f"Could not keep OS image {name} in the cache of {node}")
        return True
    finally:
        drop_staged(lu, node, key)


def send_index(lu: LogicalUnit[Any], nodes: list[str], feedback_fn: FeedbackFn) -> list[str]:
    """Upload the store's index to ``nodes``; the nodes that failed."""
    paths = lu.context.paths
    rpc = lu.require_rpc()
    if not nodes:
        return []
    return upload_files(rpc, paths, nodes, [paths.os_image_store_index], feedback_fn)


def replicate_store(lu: LogicalUnit[Any], names: list[str] | None, feedback_fn: FeedbackFn,
                    nodes: list[str] | None = None) -> list[str]:
    """Bring the store images ``names`` (None: all) and then the index to the master
    candidates ``nodes`` (None: every one); those where something failed (each a
    warning).  A node that had no store and gets none is left alone."""
    targets = candidates(lu)
    if nodes is not None:
        asked = set(nodes)
        targets = [n for n in targets if n in asked]
    if not targets or not os.path.isfile(lu.context.paths.os_image_store_index):
        return []
    entries = os_image_store.read_index(lu.context.paths)
    wanted = sorted(entries) if names is None else [n for n in names if n in entries]
    failed: set[str] = set()
    for node in targets:
        for name in wanted:
            try:
                if replicate_image(lu, node, name, entries[name], feedback_fn):
                    feedback_fn(f"* OS image {name}: copied to master candidate {node}")
            except errors.GanetiError as exc:
                lu.LogWarning(f"Could not copy OS image {name} to master candidate {node}:"
                              f" {exc}")
                failed.add(node)
    ok = [n for n in targets if n not in failed]
    failed.update(send_index(lu, ok, feedback_fn))
    return sorted(failed)
