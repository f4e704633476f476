"""Instance exports: OP_BACKUP_PREPARE/EXPORT/REMOVE, the ``export`` query resource
and LUXI QueryExports (doc/exports.md).

An export of instance ``I`` to node ``N`` is ``<export dir>/I/`` on ``N``:
``config.ini`` (:mod:`ganeti.impexp.info`) and one image per disk, each
made by the OS ``export`` script on the primary node (a raw copy for an
instance without OS) and streamed to ``N`` (:mod:`ganeti.cmdlib.impexp`).
The directory is built as ``I.new`` and renamed at the end; any failure
removes it.  With ``shutdown`` (the default) a running instance is stopped
for the copy and started again afterwards, also when the export failed;
without it (``--noshutdown``) the ``plain`` disks of a running instance are
exported from an LVM snapshot (``blockdev_snapshot``), removed again after
the copy whatever its outcome (doc/exports.md, "Exports of running
instances");
``remove_instance`` removes it after a successful export instead.  Older
exports of the instance on other nodes are removed after a success.
"""

from __future__ import annotations

import time
from typing import Any

from ganeti import constants, errors, locking, parameters, query, serializer
from ganeti.impexp import info as exportinfo
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import backup_remote, drbd, firmware_state
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.impexp import Transfer, run_transfers
from ganeti.cmdlib.instance import (InstanceLU, check_node_online, expand_instance,
                                    remove_instance_lock)
from ganeti.cmdlib.common import expand_node, read_domain_secret
from ganeti.cmdlib.instance_operation import remove_disks, shutdown_instance
from ganeti.context import MasterContext
from ganeti.objects import Disk
from ganeti.opcodes.backup import OpBackupExport, OpBackupPrepare, OpBackupRemove
from ganeti.utils import net as netutils

__all__ = ["LUBackupPrepare", "LUBackupExport", "LUBackupRemove", "EXPORT_FIELDS",
           "collect_exports", "query_exports", "build_export_info", "snapshot_disk"]


class LUBackupPrepare(NoHooksLU[OpBackupPrepare]):
    """Prepare an export: nothing to do in local mode (returns None); in remote mode
    make the transfer key on the primary node and return what the destination
    cluster needs, signed with the domain secret: ``{"handshake", "x509_key_name",
    "x509_ca"}`` (doc/exports.md, "Moves between clusters")."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        self.op.instance_name = inst.name
        self.needed_locks = {locking.LEVEL_INSTANCE: [inst.name]}

    def CheckPrereq(self) -> None:
        if self.op.mode != constants.EXPORT_MODE_REMOTE:
            return
        inst = expand_instance(self.cfg, self.op.instance_name)
        pnode = self.cfg.get_node_info(inst.primary_node)
        if pnode is None:
            raise errors.OpPrereqError(f"The primary node of {inst.name} is not in the"
                                       " cluster", errors.ECODE_STATE)
        check_node_online(pnode)
        self.pnode_name = pnode.name
        self.cds = read_domain_secret(self.context.paths)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if self.op.mode != constants.EXPORT_MODE_REMOTE:
            return None
        node = self.pnode_name
        feedback_fn(f"Generating X509 certificate on {node}")
        name, cert_pem = self.require_rpc().call_x509_cert_create(
            node, validity=backup_remote.CERT_VALIDITY,
        ).one(node, f"Cannot make the transfer key on {node}")
        salt = backup_remote.new_salt()
        return {
            "handshake": backup_remote.compute_handshake(self.cds, backup_remote.new_salt()),
            "x509_key_name": backup_remote.sign_key_name(self.cds, str(name), salt),
            "x509_ca": backup_remote.sign_certificate(self.cds, str(cert_pem), salt),
        }


def build_export_info(lu: InstanceLU[Any], images: list[str | None], timestamp: float,
                      digests: list[str | None] | None = None) -> exportinfo.ExportInfo:
    """The ``config.ini`` content for the locked instance (filled parameters, as upstream).

    ``digests`` are the images' SHA-256 as the target node confirmed them
    (``disk<N>_sha256``, checked by an import).
    """
    cfg, inst = lu.cfg, lu.instance
    cluster = cfg.get_cluster_info()
    nics = []
    for nic in inst.nics:
        filled = parameters.fill_nicparams(cluster, nic.nicparams)
        nics.append(exportinfo.ExportNic(
            mac=nic.mac, ip=nic.ip, name=nic.name, network=nic.network,
            nicparams={k: str(v) for k, v in filled.items() if k in exportinfo.NIC_PARAMS}))
    shas = list(digests or [])
    disks = [exportinfo.ExportDisk(size=d.size, dump=image, ivname=d.iv_name or f"disk/{i}",
                                   name=d.name, sha256=shas[i] if i < len(shas) else None)
             for i, (d, image) in enumerate(zip(lu.disks, images))]
    return exportinfo.ExportInfo(
        name=inst.name, os=inst.os, timestamp=int(timestamp), source=lu.pnode.name,
        disk_template=inst.disk_template, hypervisor=inst.hypervisor, tags=list(inst.tags),
        disks=disks, nics=nics,
        hvparams=parameters.fill_instance_hvparams(cluster, inst),
        beparams=parameters.fill_instance_beparams(cluster, inst),
        osparams=dict(inst.osparams), osparams_private=dict(inst.osparams_private))


def snapshot_disk(disk: Disk, logical_id: Any) -> dict[str, Any]:
    """The disk dict of a snapshot of ``disk`` whose volume is ``logical_id``
    (same type and size, no children).  Pure."""
    if not isinstance(logical_id, list) or not all(isinstance(x, str) for x in logical_id):
        raise errors.OpExecError(f"Invalid snapshot of disk {disk.uuid}: {logical_id!r}")
    return serializer.to_data(Disk(uuid=disk.uuid, dev_type=disk.dev_type, size=disk.size,
                                   logical_id=list(logical_id), mode=constants.DISK_RDONLY))


def _confirmed_sha256(result: dict[str, Any] | None) -> str:
    """The SHA-256 a finished transfer reports (both ends compared it)."""
    sha = result.get("sha256") if isinstance(result, dict) else None
    if not isinstance(sha, str) or len(sha) != 64:
        raise errors.OpExecError(f"A disk transfer finished without its checksum: {result!r}")
    return sha


class LUBackupExport(InstanceLU[OpBackupExport]):
    """Export the instance to ``target_node``; returns ``(True, [True per disk])``."""

    HPATH = "instance-export"

    #: seconds to wait for each destination of a remote export to answer
    REMOTE_CONNECT_TIMEOUT = 10.0

    @property
    def _remote(self) -> bool:
        return self.op.mode == constants.EXPORT_MODE_REMOTE

    def CheckArguments(self) -> None:
        op = self.op
        if self._remote:
            # upstream's parameters; checked against the domain secret in CheckInstance
            if not op.x509_key_name:
                raise errors.OpPrereqError("Missing X509 key name for encryption",
                                           errors.ECODE_INVAL)
            if not op.destination_x509_ca:
                raise errors.OpPrereqError("Missing destination X509 CA", errors.ECODE_INVAL)
        elif not isinstance(op.target_node, str) or not op.target_node:
            raise errors.OpPrereqError("An export needs the target node (a node name)",
                                       errors.ECODE_INVAL)
        if op.compress != "none":
            raise errors.OpPrereqError(f"Compression '{op.compress}' is not supported (only"
                                       " 'none')", errors.ECODE_INVAL)
        if op.zero_free_space:
            raise errors.OpPrereqError("Zeroing free space is not supported",
                                       errors.ECODE_INVAL)
        if op.remove_instance and not op.shutdown:
            raise errors.OpPrereqError("Can not remove the instance without shutting it"
                                       " down before", errors.ECODE_INVAL)

    def ExpandExtra(self) -> None:
        if self._remote:
            return
        self.target = expand_node(self.cfg, str(self.op.target_node))
        self.op.target_node = self.target.name
        self.op.target_node_uuid = self.target.uuid
        self.extra_node_uuids.append(self.target.uuid)

    def _check_remote(self) -> None:
        """A remote export: check upstream's parameters against the domain secret,
        then try each destination.

        Raises OpPrereqError for bad parameters (``ECODE_INVAL``), for a
        transfer key the primary node does not have (any more), and for a
        destination that does not answer (``ECODE_ENVIRON``); nothing changes
        then.  Sets :attr:`remote` (:class:`backup_remote.RemoteExport`).
        """
        cds = read_domain_secret(self.context.paths)
        remote = backup_remote.check_remote_export(cds, self.op, len(self.disks))
        node = self.pnode.name
        res = self.require_rpc().call_x509_cert_check([node], name=remote.key_name).get(node)
        if res is None or res.failed:
            raise errors.OpPrereqError(
                f"The transfer key {remote.key_name} cannot be used on {node}"
                f" ({res.fail_msg if res else 'no answer'}); prepare the export again",
                errors.ECODE_ENVIRON)
        for idx, (host, port, _magic) in enumerate(remote.dests):
            why = netutils.connect_error(host, port, self.REMOTE_CONNECT_TIMEOUT)
            if why is not None:
                what = f"disk {idx}" if idx < len(self.disks) else "the UEFI/TPM state"
                raise errors.OpPrereqError(f"Destination {host}:{port} of {what} is not"
                                           f" reachable: {why}", errors.ECODE_ENVIRON)
        self.remote = remote

    def CheckInstance(self) -> None:
        check_node_online(self.pnode, " as primary node")
        if self._remote:
            if not self.op.shutdown and self.instance.admin_state == constants.ADMINST_UP:
                raise errors.OpPrereqError("A remote export of a running instance needs"
                                           " shutdown (its disks are sent as they are)",
                                           errors.ECODE_STATE)
            self._check_remote()
            return
        target = self.cfg.get_node_info(self.target.uuid)
        if target is None:
            raise errors.OpPrereqError(f"Node {self.op.target_node} is not in the cluster",
                                       errors.ECODE_NOENT)
        check_node_online(target, " as export target")
        self.target = target

    def HookExtra(self) -> dict[str, Any]:
        extra = {"EXPORT_MODE": self.op.mode, "EXPORT_DO_SHUTDOWN": self.op.shutdown,
                 "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout,
                 "REMOVE_INSTANCE": str(bool(self.op.remove_instance))}
        if not self._remote:
            extra["EXPORT_NODE"] = self.op.target_node
        return extra

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        nodes, _ = super().BuildHooksNodes()
        if not self._remote and self.target.name not in nodes:
            nodes.append(self.target.name)
        return nodes, nodes

    def _start_again(self, feedback_fn: FeedbackFn) -> None:
        feedback_fn(f"Starting instance {self.instance.name} again")
        data = self.rpc_instance()
        self.require_rpc().call_instance_start(
            self.pnode.name, instance=data, disks=data["disks_info"], startup_paused=False,
        ).one(self.pnode.name, f"Could not start instance {self.instance.name} again")

    def _snapshot_disks(self, data: dict[str, Any],
                        feedback_fn: FeedbackFn) -> dict[int, dict[str, Any]]:
        """Snapshot the ``plain`` disks of the running instance on its primary node.

        Points ``data["disks_info"]`` at the snapshots (what the transfers
        read) and returns them by disk index; on a failure the snapshots
        made so far are removed again and the error raised.
        """
        node = self.pnode.name
        snaps: dict[int, dict[str, Any]] = {}
        try:
            for idx, disk in enumerate(self.disks):
                if disk.dev_type not in constants.DTS_SNAPSHOT_CAPABLE:
                    continue
                feedback_fn(f"Creating a snapshot of disk/{idx} on node {node}")
                snap = snapshot_disk(disk, self.require_rpc().call_blockdev_snapshot(
                    node, disk=drbd.rpc_disk(disk, self.cfg), snap_size=disk.size,
                ).one(node, f"Cannot snapshot disk/{idx} of {self.instance.name} on {node}"))
                snaps[idx] = snap
                data["disks_info"][idx] = snap
        except BaseException:
            self._remove_snapshots(snaps)
            raise
        return snaps

    def _remove_snapshots(self, snaps: dict[int, dict[str, Any]]) -> None:
        """Remove the snapshots, then point the instance's disk links back at its
        volumes (reading a snapshot linked it there); only warns."""
        node, rpc = self.pnode.name, self.require_rpc()
        for idx, snap in sorted(snaps.items()):
            res = rpc.call_blockdev_remove([node], disk=snap).get(node)
            if res is None or res.failed:
                self.LogWarning(f"Could not remove the snapshot of disk/{idx} on {node}:"
                                f" {res.fail_msg if res else 'no answer'}")
            res = rpc.call_blockdev_assemble(
                [node], disk=serializer.to_data(self.disks[idx]),
                instance_name=self.instance.name, as_primary=True, idx=idx).get(node)
            if res is None or res.failed:
                self.LogWarning(f"Could not re-activate disk/{idx} on {node}:"
                                f" {res.fail_msg if res else 'no answer'}")

    def _export(self, feedback_fn: FeedbackFn, *, running: bool = False) -> str:
        inst, target = self.instance, self.target.name
        self.require_rpc().call_export_stage(
            target, instance_name=inst.name, create=True,
        ).one(target, f"Cannot prepare the export directory on {target}")
        snaps: dict[int, dict[str, Any]] = {}
        try:
            data = self.rpc_instance()
            if running:
                snaps = self._snapshot_disks(data, feedback_fn)
            images: list[str | None] = []
            transfers = []
            for idx, disk in enumerate(self.disks):
                image = f"{disk.uuid}.disk{idx}"
                images.append(image)
                transfers.append(Transfer(
                    label=f"disk/{idx}", src_node=self.pnode.name, dst_node=target,
                    source={"kind": "disk", "disk": snaps.get(idx, drbd.rpc_disk(disk, self.cfg)),
                            "index": idx, "instance": data},
                    dest={"kind": "export", "instance_name": inst.name, "file": image,
                          "limit": disk.size * 1024 * 1024, "label": f"disk/{idx}"},
                    op="export", instance=inst.name))
            try:
                run_transfers(self, transfers, feedback_fn)
            finally:
                self._remove_snapshots(snaps)
            digests: list[str | None] = [_confirmed_sha256(x.result) for x in transfers]
            info = build_export_info(self, images, time.time(), digests)
            info.firmware_state = firmware_state.fetch(self, self.instance, self.pnode.name)
            return self.require_rpc().call_finalize_export(
                target, instance_name=inst.name, config=exportinfo.build(info),
            ).one(target, f"Cannot finalize the export on {target}")
        except BaseException:
            res = self.require_rpc().call_export_stage(
                [target], instance_name=inst.name, create=False).get(target)
            if res is None or res.failed:
                self.LogWarning(f"Could not remove the unfinished export on {target}:"
                                f" {res.fail_msg if res else 'no answer'}")
            raise

    def _export_remote(self, feedback_fn: FeedbackFn) -> None:
        """Send every disk to the other cluster's listeners; the transfer key goes
        afterwards, whatever happened (the listeners are gone too: another try
        starts from a new prepare-export)."""
        inst, pname, remote = self.instance, self.pnode.name, self.remote
        data = self.rpc_instance()
        transfers = []
        for idx, (disk, (host, port, magic)) in enumerate(zip(self.disks, remote.disk_dests)):
            transfers.append(Transfer(
                label=f"disk/{idx}", src_node=pname, dst_node=f"{host}:{port}",
                address=(host, port),
                source={"kind": "disk", "disk": drbd.rpc_disk(disk, self.cfg), "index": idx,
                        "instance": data},
                dest={"kind": "remote", "magic": magic, "key_name": remote.key_name,
                      "ca": remote.dest_ca},
                op="export", instance=inst.name))
        if remote.firmware_dest is not None:
            # the destination asked for the UEFI/TPM state: sent last, empty when the
            # instance has none here (doc/exports.md, "Moves between clusters")
            host, port, magic = remote.firmware_dest
            transfers.append(Transfer(
                label="firmware", src_node=pname, dst_node=f"{host}:{port}",
                address=(host, port), source={"kind": "firmware", "instance_uuid": inst.uuid},
                dest={"kind": "remote", "magic": magic, "key_name": remote.key_name,
                      "ca": remote.dest_ca},
                op="export", instance=inst.name))
        try:
            run_transfers(self, transfers, feedback_fn)
        finally:
            res = self.require_rpc().call_x509_cert_remove(
                [pname], name=remote.key_name).get(pname)
            if res is None or res.failed:
                self.LogWarning(f"Could not remove the transfer key {remote.key_name} on"
                                f" {pname}: {res.fail_msg if res else 'no answer'}")

    def _remove_old_exports(self, feedback_fn: FeedbackFn) -> None:
        others = [n.name for n in self.cfg.get_all_nodes_info().values()
                  if not n.offline and n.uuid != self.target.uuid]
        rpc = self.require_rpc()
        for node, res in (rpc.call_export_list(others) if others else {}).items():
            if res.failed or self.instance.name not in (res.payload or []):
                continue
            feedback_fn(f"Removing the older export of {self.instance.name} on {node}")
            gone = rpc.call_export_remove([node], export=self.instance.name).get(node)
            if gone is None or gone.failed:
                self.LogWarning(f"Could not remove the older export on {node}:"
                                f" {gone.fail_msg if gone else 'no answer'}")

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op, inst = self.op, self.instance
        stopped = False
        if op.shutdown and inst.admin_state == constants.ADMINST_UP:
            feedback_fn(f"Shutting down instance {inst.name}")
            shutdown_instance(self, op.shutdown_timeout)
            stopped = True
        running = not stopped and inst.admin_state == constants.ADMINST_UP
        try:
            if self._remote:
                self._export_remote(feedback_fn)
            else:
                path = self._export(feedback_fn, running=running)
        except BaseException:
            if stopped:
                try:
                    self._start_again(feedback_fn)
                except errors.GanetiError as exc:
                    self.LogWarning(str(exc))
            raise
        if self._remote:
            feedback_fn(f"Export of {inst.name} sent to the other cluster")
        else:
            feedback_fn(f"Export of {inst.name} written to {self.target.name}:{path}")
        if op.remove_instance:
            feedback_fn(f"Removing instance {inst.name}")
            remove_disks(self, ignore_failures=op.ignore_remove_failures)
            firmware_state.remove_everywhere(self, inst)
            self.cfg.remove_instance(inst.uuid)
            remove_instance_lock(self, inst.name)
        elif stopped:
            self._start_again(feedback_fn)
        if not self._remote:
            self._remove_old_exports(feedback_fn)
        return [True, [True] * len(self.disks)]


class LUBackupRemove(NoHooksLU[OpBackupRemove]):
    """Remove every export of the instance (by its name, also when it is gone)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.cfg.get_instance_info_by_name(self.op.instance_name)
        name = inst.name if inst is not None else self.op.instance_name
        found = False
        rpc = self.require_rpc()
        for node, exports in _list_exports(self.context, None).items():
            if not isinstance(exports, list):
                self.LogWarning(f"Failed to query node {node} (continuing)")
                continue
            if name in exports:
                found = True
                res = rpc.call_export_remove([node], export=name).get(node)
                if res is None or res.failed:
                    self.LogWarning(f"Could not remove the export of {name} on {node}:"
                                    f" {res.fail_msg if res else 'no answer'}")
                else:
                    feedback_fn(f"Removed the export of {name} on {node}")
        if not found:
            feedback_fn(f"No export of {name} found. If it belongs to a deleted instance,"
                        " give its fully qualified name.")
        return None


# --- queries ------------------------------------------------------------------------------

def _list_exports(context: MasterContext, nodes: list[str] | None) -> dict[str, list[str] | bool]:
    """``{node: [export names] or False}`` of the online nodes (or of ``nodes``)."""
    cfg = context.committed_cfg()
    known = {n.name: n for n in cfg.get_all_nodes_info().values()}
    if nodes:
        missing = [n for n in nodes if n not in known]
        if missing:
            raise errors.OpPrereqError(f"Node(s) {', '.join(missing)} not known",
                                       errors.ECODE_NOENT)
        names = list(dict.fromkeys(nodes))
    else:
        names = sorted(known)
    online = [n for n in names if not known[n].offline]
    if context.rpc is None:
        raise errors.OpExecError("Node RPC is not available on this master")
    results = context.rpc.call_export_list(online) if online else {}
    out: dict[str, list[str] | bool] = {}
    for name in names:
        res = results.get(name)
        ok = res is not None and not res.failed and isinstance(res.payload, list)
        out[name] = list(res.payload) if ok and res is not None else False
    return out


def query_exports(context: MasterContext, nodes: Any, use_locking: bool = False) -> dict[str, Any]:
    """LUXI ``QueryExports(nodes, use_locking)``: ``{node: [export names] or false}``."""
    if nodes is not None and (not isinstance(nodes, list)
                              or not all(isinstance(n, str) for n in nodes)):
        raise errors.ParameterError("QueryExports: nodes must be a list of names",
                                    errors.ECODE_INVAL)
    return _list_exports(context, nodes or None)


EXPORT_FIELDS = query.make_table([
    query.FieldDef("node", "Node", constants.QFT_TEXT, "Node name",
                   lambda ctx, item: item[0]),
    query.FieldDef("export", "Export", constants.QFT_TEXT, "Export name",
                   lambda ctx, item: query.UNAVAIL if item[1] is None else item[1]),
])


def collect_exports(context: MasterContext, qfilter: Any,
                    needs: set[str]) -> tuple[list[Any], Any]:
    """Items ``(node, export)`` of the ``export`` resource (``(node, None)``: node failed)."""
    names = query.requested_names(qfilter, "node")
    items: list[tuple[str, str | None]] = []
    for node, exports in _list_exports(context, list(names) if names else None).items():
        if exports is False:
            items.append((node, None))
        else:
            assert isinstance(exports, list)
            items.extend((node, e) for e in exports)
    return sorted(items, key=lambda i: (query.nice_sort_key(i[0]), i[1] or "")), None
