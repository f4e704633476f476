"""The LUs of ``gnt-os image add|list|remove`` (doc/images.md, "The image store").

The store's files are :mod:`ganeti.cmdlib.os_image_store`'s; an add and a
remove also reach the master candidates (:mod:`ganeti.cmdlib.os_image_replica`).
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import os_image_replica, os_image_store
from ganeti.cmdlib.base import NoHooksLU
from ganeti.impexp import imagestore, osimage
from ganeti.opcodes.os import OpOsImageAdd, OpOsImageList, OpOsImageRemove

__all__ = ["LUOsImageAdd", "LUOsImageRemove", "LUOsImageList"]


class LUOsImageAdd(NoHooksLU[OpOsImageAdd]):
    """Copy or download an image into the store, check it and enter it."""

    REQ_BGL = False

    def CheckArguments(self) -> None:
        imagestore.check_name(self.op.name)
        if self.op.checksum is not None:
            osimage.parse_checksum(self.op.checksum)

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        if self.op.name in os_image_store.read_index(self.context.paths):
            raise errors.OpPrereqError(f"OS image {self.op.name} is already in the store",
                                       errors.ECODE_EXISTS)

    def Exec(self, feedback_fn: FeedbackFn) -> dict[str, Any]:
        feedback_fn(f"* copying OS image {self.op.source} into the store as {self.op.name}")
        entry = os_image_store.add_image(self.context.paths, self.op.name, self.op.source, self.op.checksum)
        feedback_fn(f"* OS image {self.op.name}: {entry['format']}, {entry['size']} bytes,"
                    f" sha256:{entry['sha256']}")
        os_image_replica.replicate_store(self, [self.op.name], feedback_fn)
        return entry


class LUOsImageRemove(NoHooksLU[OpOsImageRemove]):
    """Remove an image from the store, and the nodes' cached copies of it."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        os_image_store.lookup(self.context.paths, self.op.name)

    def Exec(self, feedback_fn: FeedbackFn) -> None:
        entry = os_image_store.remove_image(self.context.paths, self.op.name)
        for node in os_image_replica.send_index(self, os_image_replica.candidates(self),
                                                feedback_fn):
            self.LogWarning(f"Could not update the OS image store's index on {node}")
        if any(e["sha256"] == entry["sha256"] for e in os_image_store.read_index(self.context.paths).values()):
            return      # another name has the same bytes: the nodes keep their copies
        cfg = self.context.committed_cfg()
        nodes = sorted(n.name for n in cfg.get_all_nodes_info().values() if not n.offline)
        if not nodes:
            return
        results = self.require_rpc().call_os_image_cache_remove(nodes, sha256=entry["sha256"])
        for node in nodes:
            res = results.get(node)
            if res is None or res.failed:
                self.LogWarning(f"Could not drop the cached copy of {self.op.name} on {node}:"
                                f" {res.fail_msg if res else 'no answer'}")


class LUOsImageList(NoHooksLU[OpOsImageList]):
    """The store's entries, sorted by name (unknown names are an error)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> list[dict[str, Any]]:
        entries = os_image_store.read_index(self.context.paths)
        missing = [n for n in self.op.names if n not in entries]
        if missing:
            raise errors.OpPrereqError(f"OS image(s) not in the store: {', '.join(missing)}",
                                       errors.ECODE_NOENT)
        wanted = self.op.names or sorted(entries)
        return [entries[n] for n in sorted(wanted)]
