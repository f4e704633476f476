"""DRBD procedures: the mirror's state, its network side, and the node's minors.

Each takes disk dicts as the master sends them (with ``dynamic_params``,
:mod:`ganeti.storage.drbd`); a disk that is not ``drbd`` is skipped by the
network calls and reported as None by the status call.  Used by gnt-cluster
verify and verify-disks (the state), by live migration (the network side:
disconnect, reconnect allowing two primaries, back to one) and by the
failover and replace-disks steps (doc/storage.md, "DRBD").
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors
from ganeti.backend.blockdev import drbd_state, parse_disk, storage_for, wire_path
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.storage import drbd

__all__ = ["blockdev_getmirrorstatus", "drbd_disconnect_net", "drbd_attach_net",
           "blockdev_close", "drbd_node_info", "drbd_detach_local", "drbd_attach_local",
           "drbd_adopt_local"]


def _devices(ctx: NodeContext, disks: list) -> list[tuple[drbd.DrbdDevice, Any]]:
    found = []
    for data in disks:
        template, spec = parse_disk(data)
        if template != constants.DT_DRBD8:
            continue
        store = storage_for(ctx, template)
        assert isinstance(store, drbd.DrbdDevice)
        found.append((store, spec))
    return found


@procedure(FAST)
def blockdev_getmirrorstatus(ctx: NodeContext, disks: list) -> list[dict[str, Any] | None]:
    """Per disk dict: this node's side of the mirror (blockdev_find's fields, drbd state
    included) or None (not drbd, or its volumes are missing here).

    Per disk, the mirror state of this node's side (:func:`blockdev_find`'s fields;
    None for a disk that is not ``drbd`` or whose volumes are missing here)."""
    result: list[dict[str, Any] | None] = []
    for data in disks:
        template, spec = parse_disk(data)
        store = storage_for(ctx, template)
        if template != constants.DT_DRBD8 or not store.exists(spec):
            result.append(None)
            continue
        assert isinstance(store, drbd.DrbdDevice)
        entry: dict[str, Any] = {"dev_path": wire_path(ctx, store.get_path(spec)),
                                 "size": store.get_size(spec)}
        entry.update(drbd_state(store, spec))
        entry["drbd"]["mismatch"] = store.setup_mismatch(spec)
        result.append(entry)
    return result


@procedure(NORMAL)
def drbd_disconnect_net(ctx: NodeContext, disks: list) -> None:
    """Stop replicating the drbd disks (StandAlone; data stays). -> None

    Stop replicating the disks (each side keeps its data; StandAlone).
    """
    for store, spec in _devices(ctx, disks):
        store.disconnect(spec)


@procedure(NORMAL)
def drbd_attach_net(ctx: NodeContext, disks: list, multimaster: bool) -> None:
    """Connect the drbd disks to their peers again (multimaster: two primaries allowed, for a
    live migration). -> None

    Connect the disks to their peers again; with ``multimaster`` both sides may be
    primary at once (only for the copy of a live migration)."""
    for store, spec in _devices(ctx, disks):
        status = store.mirror_status(spec)
        if status is None:
            raise errors.StorageError(f"Disk {spec.uuid} is not set up on {ctx.hostname}")
        if status.cstate != "StandAlone":
            store.disconnect(spec)
        store.connect(spec, dual_primary=multimaster)


@procedure(NORMAL)
def drbd_detach_local(ctx: NodeContext, disks: list) -> None:
    """Let go of this node's volumes under the drbd disks (they run diskless, served by the
    peer; replace-disks). -> None

    Let go of this node's volumes under the disks (replace-disks on this node); the
    devices run on diskless, served by their peers."""
    for store, spec in _devices(ctx, disks):
        store.detach_local(spec)


@procedure(NORMAL)
def drbd_attach_local(ctx: NodeContext, disks: list, new_metadata: bool) -> None:
    """Attach this node's volumes under the drbd disks (new_metadata: written fresh first, the
    peer copies everything over). -> None

    Attach this node's volumes under the disks again (with ``new_metadata``: fresh
    metadata first, the peer copies everything over)."""
    for store, spec in _devices(ctx, disks):
        store.attach_local(spec, new_metadata)


@procedure(NORMAL)
def drbd_adopt_local(ctx: NodeContext, disks: list) -> None:
    """Set the drbd disks up over this node's existing data volumes (fresh metadata) and make
    this side primary with force: the peer copies everything over from here (modify -t drbd). ->
    None

    Set the disks up over the data already on this node's volumes: fresh
    metadata, attached and connected, then primary with force (the peer, made
    empty, copies everything over from here: a conversion from ``plain``)."""
    for store, spec in _devices(ctx, disks):
        store.attach_local(spec, True)
        store.open(spec, force=True)


@procedure(NORMAL)
def blockdev_close(ctx: NodeContext, disks: list) -> None:
    """Make this node's side of the drbd disks secondary. -> None

    Make this node's side of the disks secondary (the instance left this node).
    """
    for store, spec in _devices(ctx, disks):
        store.close(spec)


@procedure(FAST)
def drbd_node_info(ctx: NodeContext) -> dict[str, Any]:
    """{minors: configured DRBD minors, helper: usermode helper or None, version: /proc/drbd's
    first line or None}.

    ``{"minors": [configured minor, ...], "helper": the module's usermode helper or
    None, "version": the /proc/drbd version line or None}`` (gnt-cluster verify)."""
    text = drbd.read_proc_drbd()
    minors = sorted(m for m, s in drbd.parse_proc_drbd(text).items() if s.configured)
    version = text.splitlines()[0].strip() if text else None
    try:
        with open(drbd.HELPER_PARAM, encoding="utf-8") as fh:
            helper: str | None = fh.read().strip()
    except OSError:
        helper = None
    return {"minors": minors, "helper": helper, "version": version}
