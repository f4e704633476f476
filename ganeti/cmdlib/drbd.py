"""DRBD disks on the master: making their config objects, their RPC form, the sync.

A ``drbd`` disk (doc/storage.md, "DRBD") is a config :class:`Disk` whose
``logical_id`` is ``[node_a, node_b, port, minor_a, minor_b, secret]``
(node UUIDs; node A the primary at creation) and whose children are its
data and metadata ``plain`` volumes, on both nodes.  The port and minors
come from :meth:`ConfigWriter.allocate_drbd`; the secret from
:func:`new_secret`.

Every disk dict sent to a node goes through :func:`rpc_disk`, which adds,
for a DRBD disk only, the names and replication addresses of its two nodes
and the resync disk parameters in force (cluster, then the primary's node
group: ``gnt-cluster modify -D drbd:resync-rate=KIB,dynamic-resync=true``) as
``dynamic_params``, never stored.  :func:`public_logical_id` is what a
query answer shows of a logical id: the DRBD secret never leaves the
config and the node RPCs.

:func:`wait_for_sync` polls the primary's ``blockdev_find`` until every
mirror is in sync, reporting the resync as progress.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ganeti import constants, errors, parameters, serializer
from ganeti.aliases import FeedbackFn
from ganeti.config.reader import ConfigReader
from ganeti.objects import Disk, Node

__all__ = ["ACTIVATE_SYNC_STALL", "node_drbd_minors", "make_drbd_disk", "rpc_disk", "rpc_disks",
           "public_logical_id", "new_secret", "wait_for_sync", "drbd_peer", "HIDDEN",
           "SYNC_POLL", "data_lv_name", "meta_lv_name", "drbd_disk_size", "is_drbd",
           "secondary_nodes", "assemble_secondaries", "shutdown_mirrors", "check_consistent",
           "resync_control", "reconnect_mirrors", "create_mirror_disk", "make_mirror",
           "remove_mirror_disk", "connect_standalone", "sync_poll_delays", "SYNC_POLL_FIRST"]

#: what a query shows instead of a DRBD secret
HIDDEN = "<hidden>"
#: seconds between two looks at a running resync (at most: see :func:`sync_poll_delays`)
SYNC_POLL = 2.0
#: seconds before the second look: a mirror just (re)connected is usually in sync
#: within a fraction of a second, and a fixed :data:`SYNC_POLL` cost every relocation
#: step a whole poll (doc/storage.md, "Node evacuation")
SYNC_POLL_FIRST = 0.25
#: a sync that makes no progress for this long is reported as stuck
SYNC_STALL = 300.0
#: seconds a degraded mirror that is not resyncing yet is given to begin (just after
#: its set-up: the peers may still be exchanging their state)
SYNC_SETTLE = 20.0
#: the same for activate-disks --wait-for-sync (the watcher's and verify-disks'
#: activations): a peer still away is not waited for long
ACTIVATE_SYNC_STALL = 15.0


def is_drbd(disk: Disk) -> bool:
    return disk.dev_type == constants.DT_DRBD8


def new_secret() -> str:
    """A fresh shared secret for one DRBD disk (the peers' HMAC key)."""
    return secrets.token_hex(20)


def data_lv_name(disk_uuid: str, index: int) -> str:
    return f"{disk_uuid}.disk{index}_data"


def meta_lv_name(disk_uuid: str, index: int) -> str:
    return f"{disk_uuid}.disk{index}_meta"


def drbd_disk_size(size: int) -> int:
    """MiB of volume group a DRBD disk of ``size`` MiB takes on each of its nodes."""
    return size + constants.DRBD_META_SIZE


def make_drbd_disk(*, uuid: str, index: int, size: int, vg: str, mode: str,
                   name: str | None, nodes: tuple[str, str], port: int,
                   minors: tuple[int, int], secret: str, child_uuids: tuple[str, str],
                   spindles: int | None = None) -> Disk:
    """The config object of a new DRBD disk and its two volumes. Pure."""
    data = Disk(uuid=child_uuids[0], dev_type=constants.DT_PLAIN, size=size,
                logical_id=[vg, data_lv_name(uuid, index)], nodes=list(nodes),
                spindles=spindles)
    meta = Disk(uuid=child_uuids[1], dev_type=constants.DT_PLAIN, size=constants.DRBD_META_SIZE,
                logical_id=[vg, meta_lv_name(uuid, index)], nodes=list(nodes))
    return Disk(uuid=uuid, dev_type=constants.DT_DRBD8, size=size, mode=mode, name=name,
                logical_id=[nodes[0], nodes[1], port, minors[0], minors[1], secret],
                iv_name=f"disk/{index}", nodes=list(nodes), children=[data, meta],
                spindles=spindles)


def _replication_ip(node: Node) -> str:
    return node.secondary_ip or node.primary_ip


def rpc_disk(disk: Disk, cfg: ConfigReader | None = None) -> dict[str, Any]:
    """``disk`` as the node procedures take it; a DRBD disk gets the names and
    replication addresses of its two nodes (``cfg`` is needed for that)."""
    data = serializer.to_data(disk)
    if is_drbd(disk):
        if cfg is None:
            raise errors.ProgrammerError(f"Disk {disk.uuid} is a DRBD disk: its RPC form"
                                         " needs the configuration")
        ends = []
        nodes = []
        for node_uuid in disk.logical_id[:2]:
            node = cfg.get_node_info(node_uuid)
            if node is None:
                raise errors.OpExecError(f"Disk {disk.iv_name or disk.uuid}: unknown DRBD"
                                         f" node {node_uuid}")
            ends.append([node.name, _replication_ip(node)])
            nodes.append(node)
        params = parameters.fill_diskparams(cfg.get_cluster_info(), constants.DT_DRBD8,
                                            cfg.get_nodegroup(nodes[0].group))
        data["dynamic_params"] = {"drbd_nodes": ends, "resync_rate": params["resync-rate"],
                                  "resync_control": resync_control(params)}
        for key in ("net-custom", "disk-custom"):    # the operator's extra options, if any
            if params[key].split():
                data["dynamic_params"][key.replace("-", "_")] = params[key].split()
    return data


#: the dynamic resync parameters (Ganeti's names) as drbdsetup's attach options
_RESYNC_OPTIONS = (("c-plan-ahead", ""), ("c-fill-target", "s"), ("c-delay-target", ""),
                   ("c-max-rate", "k"), ("c-min-rate", "k"))


def resync_control(params: dict[str, Any]) -> dict[str, str]:
    """drbdsetup's resync controller options for the filled disk ``params``: with
    ``dynamic-resync`` the ``c-*`` ones, else ``c-plan-ahead`` 0 (a fixed
    ``resync-rate``: DRBD 8.4 plans ahead by default). Pure."""
    if not params.get("dynamic-resync"):
        return {"c-plan-ahead": "0"}
    return {name: f"{int(params[name])}{unit}" for name, unit in _RESYNC_OPTIONS}


def rpc_disks(disks: Sequence[Disk], cfg: ConfigReader | None = None) -> list[dict[str, Any]]:
    return [rpc_disk(d, cfg) for d in disks]


def public_logical_id(disk: Disk) -> list[Any]:
    """The logical id a query answer shows: a DRBD secret is replaced by :data:`HIDDEN`."""
    lid = list(disk.logical_id)
    if is_drbd(disk) and len(lid) >= 6:
        lid[5] = HIDDEN
    return lid


def drbd_peer(disk: Disk, node_uuid: str) -> str | None:
    """The other node of a DRBD disk as seen from ``node_uuid`` (None if not one of them)."""
    a, b = disk.logical_id[0], disk.logical_id[1]
    return b if node_uuid == a else a if node_uuid == b else None


def _minors_on(disk: Disk, node_uuid: str) -> list[tuple[int, str]]:
    """``(minor, peer node UUID)`` of every DRBD device of ``disk`` (its children
    included) that has ``node_uuid`` as one of its two nodes."""
    found: list[tuple[int, str]] = []
    if is_drbd(disk) and len(disk.logical_id) >= 5:
        node_a, node_b, _port, minor_a, minor_b = disk.logical_id[:5]
        if node_a == node_uuid:
            found.append((minor_a, node_b))
        elif node_b == node_uuid:
            found.append((minor_b, node_a))
    for child in disk.children:
        found.extend(_minors_on(child, node_uuid))
    return found


def node_drbd_minors(cfg: ConfigReader, node_uuid: str) -> list[list[Any]]:
    """The DRBD minors the configuration gives a node, as ``gnt-node list-drbd`` shows
    them (Ganeti's answer to the same question): one ``[node, minor, instance,
    "disk/N", role, peer]`` row per minor, names for nodes, ``role`` ``primary`` when
    the node is the instance's primary node and ``secondary`` otherwise.  Sorted. Pure."""
    def name(uuid: str) -> str:
        node = cfg.get_node_info(uuid)
        return node.name if node is not None else uuid

    rows: list[list[Any]] = []
    for inst in cfg.get_all_instances_info().values():
        role = "primary" if inst.primary_node == node_uuid else "secondary"
        for idx, disk in enumerate(cfg.get_instance_disks(inst.uuid)):
            rows.extend([name(node_uuid), minor, inst.name, f"disk/{idx}", role, name(peer)]
                        for minor, peer in _minors_on(disk, node_uuid))
    return sorted(rows)


def _progress_line(idx_name: str, found: dict[str, Any]) -> str:
    pct = found.get("sync_percent")
    eta = found.get("estimated_time")
    text = f"- device {idx_name}: {pct:.2f}% done" if isinstance(pct, (int, float)) \
        else f"- device {idx_name}: waiting for the peer"
    if isinstance(eta, int):
        text += f", {eta}s remaining (estimated)"
    return text


def describe_state(found: dict[str, Any]) -> str:
    """A mirror's side as ``/proc/drbd`` shows it, from a ``blockdev_find``
    answer: ``StandAlone Primary/Unknown UpToDate/DUnknown`` (the connection,
    then the roles and disk states when DRBD reports them).  Pure."""
    state = found.get("drbd") or {}
    parts = [str(state.get("cstate") or "unknown")]
    for mine, peer in (("role", "peer_role"), ("disk", "peer_disk")):
        if state.get(mine) or state.get(peer):
            parts.append(f"{state.get(mine) or '?'}/{state.get(peer) or '?'}")
    return " ".join(parts)


def _syncing(found: dict[str, Any]) -> bool:
    return found.get("sync_percent") is not None or \
        (found.get("drbd") or {}).get("cstate") in _CONNECTING


def _progress_key(found: dict[str, Any]) -> tuple[Any, bool]:
    """What counts as progress of a mirror being waited for: its resync percent, and
    whether it is connected at all.  A connection going round DRBD's retry loop
    (WFConnection, a handshake, a timeout, Unconnected, WFConnection again) is no
    progress: such a mirror is given :data:`SYNC_STALL` seconds in all, not that
    long after each change of its connection state."""
    cstate = (found.get("drbd") or {}).get("cstate")
    return found.get("sync_percent"), cstate not in _CONNECTING


#: connection states on the way to Connected (or to a resync): those DRBD passes
#: through by itself while it (re)tries to reach its peer; a mirror in one is
#: waited for, not given up after :data:`SYNC_SETTLE`
#: (doc/storage.md, "Waiting for a sync").  Not StandAlone: DRBD has given up its
#: peer (a failed handshake, a split brain) and only a new ``connect`` leaves it.
_CONNECTING = frozenset(["WFConnection", "WFReportParams", "WFBitMapS", "WFBitMapT",
                         "WFSyncUUID", "Connecting", "Unconnected", "NetworkFailure",
                         "Timeout", "BrokenPipe", "ProtocolError", "TearDown"])


def sync_poll_delays(first: float, most: float) -> Iterator[float]:
    """The pauses between two looks at a resync: ``first``, then doubled each time
    up to ``most``, which is kept (never more than ``most``, even when ``first`` is).
    Pure."""
    delay = first
    while True:
        yield min(delay, most)
        delay = min(delay * 2, most) if delay > 0 else most


def wait_for_sync(lu: Any, node: Node, disks: Sequence[Disk], feedback_fn: FeedbackFn, *,
                  cfg: ConfigReader, instance: str | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep, poll: float | None = None,
                  stall: float | None = None) -> bool:
    """Wait until no DRBD disk of ``disks`` is resyncing on ``node`` (the primary);
    True when every one ended in sync (not degraded).

    Looks again after ``poll`` seconds, or (``poll`` None) after
    :data:`SYNC_POLL_FIRST`, doubled at each look up to :data:`SYNC_POLL`
    (:func:`sync_poll_delays`): a small mirror just connected is seen in sync
    at once, a long resync is not polled more often than before.

    Reports each disk's percent and estimated time through ``feedback_fn``
    (Ganeti's "device disk/0: 45.20% done, 10s remaining (estimated)"), and
    each resync as typed progress entries in the job's log (op
    ``drbd-resync``, bytes done of the disk's size, DRBD's own speed and
    estimate) that also show as a ``resync`` block job in the ``instance``'s
    ``jobs`` runtime field while it runs (doc/progress.md, "Runtime jobs").  Ends
    early when nothing changed for ``stall`` seconds (default :data:`SYNC_STALL`): a
    mirror not connected yet (DRBD still trying its peer) is waited for that long;
    one degraded otherwise (StandAlone, or connected but not resyncing) only
    :data:`SYNC_SETTLE` seconds.
    """
    stall = SYNC_STALL if stall is None else stall
    mirrors = [d for d in disks if is_drbd(d)]
    if not mirrors:
        return True
    rpc = lu.require_rpc()
    feedback_fn("* waiting for the instance's disks to sync")
    last_change, last_seen = clock(), None
    started = last_change
    delays = sync_poll_delays(SYNC_POLL_FIRST, SYNC_POLL) if poll is None \
        else sync_poll_delays(poll, poll)
    with contextlib.ExitStack() as stack:
        reporters: dict[str, Any] = {}
        while True:
            states = []
            for disk in mirrors:
                found = rpc.call_blockdev_find(node.name, disk=rpc_disk(disk, cfg)).one(
                    node.name, f"Cannot read the state of disk {disk.iv_name} on {node.name}")
                if not isinstance(found, dict):
                    raise errors.OpExecError(f"Disk {disk.iv_name} is missing on {node.name}")
                states.append((disk, found))
            for disk, found in states:
                _report(lu, stack, reporters, disk, found, instance)
            syncing = [(d, f) for d, f in states if _syncing(f)]
            if not syncing:
                degraded = [f"{d.iv_name} ({describe_state(f)})" for d, f in states
                            if f.get("is_degraded")]
                if degraded and clock() - started < min(SYNC_SETTLE, stall):
                    # just set up, a mirror may not have begun its resync yet
                    sleep(next(delays))
                    continue
                if degraded:
                    lu.LogWarning(f"Disks not in sync on {node.name}: {', '.join(degraded)}")
                    return False
                feedback_fn("* the instance's disks are in sync")
                return True
            seen = tuple((d.uuid, *_progress_key(f)) for d, f in syncing)
            for disk, found in syncing:
                feedback_fn(_progress_line(disk.iv_name, found))
            now = clock()
            if seen != last_seen:
                last_seen, last_change = seen, now
            elif now - last_change > stall:
                lu.LogWarning(f"The sync of {', '.join(d.iv_name for d, _ in syncing)} on"
                              f" {node.name} made no progress for {int(stall)}s")
                return False
            sleep(next(delays))


def _report(lu: Any, stack: contextlib.ExitStack, reporters: dict[str, Any], disk: Disk,
            found: dict[str, Any], instance: str | None) -> None:
    """Progress entries (and the runtime block job) of one disk's resync."""
    pct = found.get("sync_percent")
    reporter = reporters.get(disk.uuid)
    end = disk.size * 1024 * 1024
    if isinstance(pct, (int, float)):
        if reporter is None:
            if not hasattr(lu, "progress_reporter"):
                return
            reporter = stack.enter_context(lu.progress_reporter(
                "drbd-resync", end=end, instance=instance, device=disk.iv_name,
                op_type="resync"))
            reporters[disk.uuid] = reporter
        speed = (found.get("drbd") or {}).get("sync_speed_kib")
        eta = found.get("estimated_time")
        reporter.update(int(end * pct / 100), end,
                        rate=speed * 1024.0 if isinstance(speed, int) else None,
                        eta=float(eta) if isinstance(eta, (int, float)) else None)
    elif reporter is not None and not reporter.finished:
        reporter.update(end, end)
        reporter.finish()


def secondary_nodes(lu: Any, disks: Sequence[Disk], primary_uuid: str) -> list[Node]:
    """The nodes other than the primary holding a mirror of ``disks`` (config objects)."""
    found: list[Node] = []
    for disk in disks:
        if not is_drbd(disk):
            continue
        for uuid in disk.logical_id[:2]:
            node = lu.cfg.get_node_info(uuid)
            if uuid != primary_uuid and node is not None and node not in found:
                found.append(node)
    return found


def assemble_secondaries(lu: Any, instance_name: str, disks: Sequence[Disk],
                         primary_uuid: str, *, strict: bool = False) -> None:
    """Set up the mirrors of ``disks`` on their secondary nodes (attached, connecting to
    the primary, never primary themselves).  An offline or failing secondary is a
    warning (the instance runs degraded), or an error with ``strict``."""
    rpc = lu.require_rpc()
    for node in secondary_nodes(lu, disks, primary_uuid):
        if node.offline:
            lu.LogWarning(f"Secondary node {node.name} is offline; the disks run degraded")
            continue
        for idx, disk in enumerate(disks):
            if not is_drbd(disk):
                continue
            res = rpc.call_blockdev_assemble([node.name], disk=rpc_disk(disk, lu.cfg),
                                             instance_name=instance_name, as_primary=False,
                                             idx=idx).get(node.name)
            if res is None or res.failed:
                msg = (f"Cannot assemble disk {disk.iv_name} on secondary node {node.name}:"
                       f" {res.fail_msg if res is not None else 'no answer'}")
                if strict:
                    raise errors.OpExecError(msg)
                lu.LogWarning(msg + "; the disk runs degraded")


def shutdown_mirrors(lu: Any, disks: Sequence[Disk], nodes: Sequence[Node], *,
                     strict: bool = False) -> None:
    """Take the DRBD devices of ``disks`` down on ``nodes`` (in that order; the data
    stays on the volumes).  Offline nodes are skipped; failures are warnings unless
    ``strict``."""
    rpc = lu.require_rpc()
    for node in nodes:
        if node.offline:
            continue
        for disk in disks:
            if not is_drbd(disk):
                continue
            res = rpc.call_blockdev_shutdown([node.name], disk=rpc_disk(disk, lu.cfg)).get(
                node.name)
            if res is None or res.failed:
                msg = (f"Cannot shut down disk {disk.iv_name} on node {node.name}:"
                       f" {res.fail_msg if res is not None else 'no answer'}")
                if strict:
                    raise errors.OpExecError(msg)
                lu.LogWarning(msg)


def check_consistent(lu: Any, disks: Sequence[Disk], node: Node) -> list[str]:
    """The DRBD disks of ``disks`` whose data on ``node`` is not known to be up to date
    (their iv_names; a disk the node cannot report counts as not up to date)."""
    rpc = lu.require_rpc()
    bad = []
    for disk in disks:
        if not is_drbd(disk):
            continue
        res = rpc.call_blockdev_find([node.name], disk=rpc_disk(disk, lu.cfg)).get(node.name)
        found = None if res is None or res.failed else res.payload
        if not isinstance(found, dict) or found.get("ldisk_status") != constants.LDS_OKAY:
            bad.append(disk.iv_name)
    return bad


def reconnect_mirrors(lu: Any, disks: Sequence[Disk], nodes: Sequence[Node], multimaster: bool,
                      primary: Node, feedback_fn: FeedbackFn, *, instance: str) -> None:
    """Reconnect the mirrors of ``disks`` between ``nodes`` (their two nodes), allowing
    two primaries (``multimaster``: the copy of a live migration) or one again, and
    wait until they are in sync on ``primary``; :class:`errors.OpExecError` otherwise.

    Both nodes disconnect in one RPC call (in parallel), then both connect in another,
    as Ganeti does: each step costs one round trip to the slower node, not one per node
    (doc/storage.md, "Node evacuation")."""
    rpc = lu.require_rpc()
    data = rpc_disks(disks, lu.cfg)
    names = [node.name for node in nodes]
    feedback_fn("* switching the mirrors to " + ("dual-primary" if multimaster
                                                 else "single-primary") + " mode")
    results = rpc.call_drbd_disconnect_net(names, disks=data)
    for name in names:
        results.one(name, f"Cannot disconnect the mirrors on {name}")
    results = rpc.call_drbd_attach_net(names, disks=data, multimaster=multimaster)
    for name in names:
        results.one(name, f"Cannot reconnect the mirrors on {name}")
    if not wait_for_sync(lu, primary, disks, feedback_fn, cfg=lu.cfg, instance=instance):
        raise errors.OpExecError(f"The mirrors of {instance} are not in sync after"
                                 f" reconnecting them on {primary.name}")


def create_mirror_disk(lu: Any, instance: str, nodes: tuple[Node, Node], *, uuid: str,
                       index: int, spec: dict[str, Any], vg: str, feedback_fn: FeedbackFn
                       ) -> tuple[Disk, tuple[str, str, int, int, int]]:
    """A new DRBD disk of ``instance`` between ``nodes`` (primary, secondary), made
    on the secondary, then on the primary (the initial sync starts); removed again
    from both when that fails.  Returns the disk and its port and minors
    reservation (release it once the config holds the disk)."""
    pnode, snode = nodes
    try:
        port, pminor, sminor = lu.cfg.allocate_drbd(pnode.uuid, snode.uuid)
    except errors.ConfigurationError as exc:
        raise errors.OpExecError(str(exc)) from None
    reserved = (pnode.uuid, snode.uuid, port, pminor, sminor)
    disk = make_drbd_disk(uuid=uuid, index=index, size=spec["size"], vg=vg, mode=spec["mode"],
                          name=spec.get("name"), nodes=(pnode.uuid, snode.uuid), port=port,
                          minors=(pminor, sminor), secret=new_secret(),
                          child_uuids=(str(uuidlib.uuid4()), str(uuidlib.uuid4())),
                          spindles=spec.get("spindles"))
    try:
        make_mirror(lu, instance, disk, (pnode, snode), feedback_fn)
    except BaseException:
        remove_mirror_disk(lu, disk, nodes)
        lu.cfg.release_drbd([reserved])
        raise
    return disk, reserved


def make_mirror(lu: Any, instance: str, disk: Disk, nodes: tuple[Node, Node],
                feedback_fn: FeedbackFn, verb: str = "create") -> None:
    """``blockdev_create`` of the DRBD ``disk`` on the secondary, then the primary of
    ``nodes`` (primary, secondary): the primary starts the initial sync."""
    pnode, snode = nodes
    for node in (snode, pnode):
        feedback_fn(f"* {verb[:-1]}ing disk {disk.iv_name} ({disk.size} MiB) on {node.name}")
        lu.require_rpc().call_blockdev_create(
            node.name, disk=rpc_disk(disk, lu.cfg), size=disk.size,
            owner_instance_name=instance, on_primary=node is pnode,
            info=constants.DISK_INFO_PREFIX + instance, excl_stor=False,
        ).one(node.name, f"Cannot {verb} disk {disk.iv_name} on {node.name}")


def remove_mirror_disk(lu: Any, disk: Disk, nodes: Sequence[Node],
                       what: str | None = None) -> None:
    """Remove ``disk`` (a DRBD disk or one of its volumes) from ``nodes``; failures are
    warnings naming ``what`` (default: the disk)."""
    for node in nodes:
        res = lu.require_rpc().call_blockdev_remove([node.name],
                                                    disk=rpc_disk(disk, lu.cfg)).get(node.name)
        if res is None or res.failed:
            lu.LogWarning(f"Cannot remove {what or f'disk {disk.iv_name}'} on {node.name}:"
                          f" {res.fail_msg if res else 'no answer'}; remove it by hand"
                          " (gnt-cluster verify lists it)")


def connect_standalone(lu: Any, node: Node, disks: Sequence[Disk]) -> None:
    """Connect the sides of ``disks`` on ``node`` that are StandAlone (after a split
    brain DRBD leaves both ends so; a side with new volumes reconnects by itself, its
    peer does not)."""
    if node.offline:
        return
    rpc = lu.require_rpc()
    data = rpc_disks(disks, lu.cfg)
    states = rpc.call_blockdev_getmirrorstatus(node.name, disks=data).one(
        node.name, f"Cannot read the mirrors' state on {node.name}")
    alone = [d for d, state in zip(data, states or [])
             if isinstance(state, dict) and (state.get("drbd") or {}).get("cstate")
             == "StandAlone"]
    if alone:
        rpc.call_drbd_attach_net(node.name, disks=alone, multimaster=False).one(
            node.name, f"Cannot connect the mirrors on {node.name} to their peers")
