"""Helpers shared by the ``gnt-cluster`` modules: the nodes over SSH, masterd's arguments."""

from __future__ import annotations

import os

from ganeti import errors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["node_ssh_targets", "masterd_args"]


def masterd_args() -> list[str]:
    """Extra arguments for the master daemon ($GANETI_MASTERD_ARGS, shell words)."""
    import shlex
    return shlex.split(os.environ.get("GANETI_MASTERD_ARGS", ""))


def node_ssh_targets(paths: Any, names: list[str] | None = None) -> list[tuple[str, str, int]]:
    """``(name, address, ssh_port)`` of the cluster's nodes (or ``names``) from ssconf."""
    from ganeti import ssconfstore
    store = ssconfstore.SimpleStore(paths)
    ips = store.get_node_primary_ips()
    try:
        ports = store.get_ssh_ports()
    except errors.GanetiError:
        ports = {}
    nodes = store.get_node_list()
    if names:
        unknown = [n for n in names if n not in ips]
        if unknown:
            raise errors.OpPrereqError(f"Unknown node(s): {', '.join(unknown)}",
                                       errors.ECODE_NOENT)
        nodes = list(dict.fromkeys(names))
    return [(n, ips[n], int(ports.get(n, 22))) for n in nodes]
