"""``config.data`` as a document: read, decode, write, and restore a tree to it.

The helpers of :mod:`ganeti.config` that work on one document rather than
on the writer's state: reading and strictly decoding the file (refusing a
missing, corrupt or wrong-version one), the default atomic writer, and
:func:`restore_tree`, which puts a live tree back to a durable document
after a failed write (see "Failures" in :mod:`ganeti.config`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ganeti import constants, errors, ipolicy, serializer
from ganeti.objects import Cluster, ConfigData, Disk, Instance, Network, Node, NodeGroup
from ganeti.utils import io

__all__ = ["CONFIG_MODE", "STORES", "create_config_file", "decode_config", "load_config_data", "read_config",
           "restore_tree", "store_of", "sync_members", "write_config_file"]

CONFIG_MODE = 0o640
_MAX_CONFIG_SIZE = 256 * 1024 * 1024


def load_config_data(path: str) -> ConfigData:
    """Read and decode ``config.data``; raises :class:`errors.ConfigurationError`."""
    return read_config(path)[1]


def read_config(path: str) -> tuple[bytes, ConfigData]:
    """The bytes of ``config.data`` and their decoded tree."""
    try:
        raw = io.read_file(path, max_size=_MAX_CONFIG_SIZE)
    except FileNotFoundError as exc:
        raise errors.ConfigurationError(
            f"Configuration file {path} does not exist; is the cluster initialised?") from exc
    except OSError as exc:
        raise errors.ConfigurationError(f"Cannot read configuration file {path}: {exc}") from exc
    except errors.GanetiError as exc:
        raise errors.ConfigurationError(f"Cannot read configuration file {path}: {exc}") from exc
    try:
        data = decode_config(raw)
    except errors.SerializationError as exc:
        raise errors.ConfigurationError(
            f"Configuration file {path} is corrupt and was left untouched: {exc}") from exc
    if data.version != constants.CONFIG_VERSION:
        raise errors.ConfigurationError(
            f"Configuration file {path} has version {data.version}, expected"
            f" {constants.CONFIG_VERSION}; refusing to use it")
    return raw, data


def decode_config(raw: bytes) -> ConfigData:
    """Decode a config document; raises :class:`errors.SerializationError`."""
    plain = serializer.loads(raw)
    if not isinstance(plain, dict) or "cluster" not in plain or "version" not in plain:
        raise errors.SerializationError("top level must be an object with 'version' and 'cluster'")
    data = serializer.from_data(ConfigData, plain)
    if not isinstance(data.cluster, Cluster):
        raise errors.SerializationError("'cluster' is not an object")
    # older documents: instance policies in an older shape or with keys missing
    data.cluster.ipolicy = ipolicy.upgrade_ipolicy(data.cluster.ipolicy, group=False)
    for group in data.nodegroups.values():
        group.ipolicy = ipolicy.upgrade_ipolicy(group.ipolicy, group=True)
    return data


def write_config_file(path: str, raw: bytes) -> None:
    """The default ``write_fn``: atomic replace with fsync of file and directory."""
    io.write_file_atomic(path, raw, mode=CONFIG_MODE)


def create_config_file(path: str, raw: bytes) -> None:
    """Write a new ``config.data``; :class:`errors.ConfigurationError` if ``path`` exists."""
    # write a complete temporary file, then hard-link it into place:
    # link() fails if the target exists, so nothing is ever overwritten
    tmp = f"{path}.init-{os.getpid()}"
    try:
        io.write_file_atomic(tmp, raw, mode=CONFIG_MODE)
        os.link(tmp, path)
    except FileExistsError as exc:
        raise errors.ConfigurationError(
            f"Configuration file {path} already exists; refusing to overwrite it") from exc
    except OSError as exc:
        raise errors.ConfigurationError(f"Cannot create {path}: {exc}") from exc
    finally:
        io.remove_file(tmp)
    io.fsync_dir(os.path.dirname(os.path.abspath(path)))




STORES: dict[type, str] = {Node: "nodes", NodeGroup: "nodegroups", Instance: "instances",
                            Disk: "disks", Network: "networks"}


def store_of(obj: Any) -> str:
    """The ``ConfigData`` field holding ``obj`` ("cluster" for the Cluster)."""
    return "cluster" if isinstance(obj, Cluster) else STORES[type(obj)]


def restore_tree(live: ConfigData, old: ConfigData, touched: dict[tuple[str, str], int],
                 serial: int) -> dict[tuple[str, str], int]:
    """Make ``live`` equal to ``old`` again where changes after ``serial`` touched it.

    ``touched`` maps ``(store, uuid)`` to the serial of the last change
    that touched the object; those newer than ``serial`` get ``old``'s
    field values in place (the live object keeps its identity).  Objects
    missing from ``old`` are dropped, objects missing from ``live`` come
    back, and the root's own fields (serial, times, filters) are copied.
    Returns the touch records still valid (none newer than ``serial``).
    """
    def put_back(target: Any, source: Any) -> None:
        for f in dataclasses.fields(source):
            setattr(target, f.name, getattr(source, f.name))

    if touched.get(("cluster", live.cluster.uuid), 0) > serial:
        put_back(live.cluster, old.cluster)
    for name in STORES.values():
        current: dict[str, Any] = getattr(live, name)
        before: dict[str, Any] = getattr(old, name)
        for uuid in [u for u in current if u not in before]:
            del current[uuid]
        for uuid, obj in before.items():
            mine = current.get(uuid)
            if mine is None or type(mine) is not type(obj):
                current[uuid] = obj
            elif touched.get((name, uuid), 0) > serial:
                put_back(mine, obj)
    for f in dataclasses.fields(ConfigData):
        if f.name != "cluster" and f.name not in STORES.values():
            setattr(live, f.name, getattr(old, f.name))
    return {k: v for k, v in touched.items() if v <= serial}


def sync_members(data: ConfigData) -> None:
    """Recompute every node group's ``members`` (node UUIDs sorted by node name)."""
    members: dict[str, list[str]] = {g: [] for g in data.nodegroups}
    for node in sorted(data.nodes.values(), key=lambda n: n.name):
        if node.group in members:
            members[node.group].append(node.uuid)
    for uuid, group in data.nodegroups.items():
        group.members = members[uuid]
