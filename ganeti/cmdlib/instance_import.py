"""OP_INSTANCE_CREATE with ``mode=import``: read an export, then stream its images in
(doc/exports.md).

:func:`read_export` runs in CheckPrereq: it finds the export (``src_node``
and ``src_path``; without ``src_node`` every online node is searched for
an export named ``src_path``, default the instance name), reads its
``config.ini`` and fills what the opcode leaves open, as upstream does:
OS, disk template, disks, NICs (their MACs included), tags, hypervisor,
and the hypervisor, backend and OS parameters not given (parameters this
cluster does not know are skipped with a warning; with ``identify_defaults``
those equal to the cluster defaults are dropped).  :func:`import_disks`
runs in Exec once the disks exist: each image is streamed from the source
node to the primary node, where the OS ``import`` script writes it (a raw
copy for an instance without OS).  An image is a file of the export's own
directory only, checked against the SHA-256 ``config.ini`` records and
never larger than its disk (doc/exports.md, "Trusting an import").  The
create LU removes the disks and the config entry again when it fails.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, parameters
from ganeti.impexp import info as exportinfo
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.impexp import Transfer, run_transfers
from ganeti.cmdlib.instance import (check_node_online, instance_rpc_dict, with_secret_osparams)
from ganeti.cmdlib.common import expand_node
from ganeti.objects import Instance
from ganeti.opcodes.instance import OpInstanceCreate
from ganeti.pathutils import Paths
from ganeti.private import Private

__all__ = ["read_export", "import_disks", "ImportImage", "EXPORT_DIR", "FOREIGN_EXPORT_DIRS",
           "source_name"]

#: the export directory in canonical form (as node RPC names paths)
EXPORT_DIR = Paths(root="/").export_dir

#: where Debian's Ganeti packages keep exports: their clients (upstream's burnin) name an
#: export by an absolute path below it, which means the export of that name here
#: (doc/exports.md, "Source paths")
FOREIGN_EXPORT_DIRS = ("/var/lib/ganeti/export",)


def source_name(src_path: str) -> str:
    """``src_path`` with a :data:`FOREIGN_EXPORT_DIRS` prefix made a name (else as is)."""
    for foreign in FOREIGN_EXPORT_DIRS:
        if src_path.startswith(foreign + "/"):
            rest = posixpath.normpath(src_path[len(foreign) + 1:])
            if rest not in (".", "..") and not rest.startswith("../"):
                return rest
    return src_path


def _find_source(lu: LogicalUnit[OpInstanceCreate]) -> None:
    """Set ``op.src_node`` (searching the online nodes) and ``op.src_path``."""
    op, cfg = lu.op, lu.cfg
    op.src_path = source_name(op.src_path or op.instance_name)
    if op.src_node is not None:
        node = expand_node(cfg, op.src_node)
        check_node_online(node, " (export source)")
        op.src_node, op.src_node_uuid = node.name, node.uuid
        return
    if op.src_path.startswith("/"):
        raise errors.OpPrereqError("An absolute source path needs the source node (src_node)",
                                   errors.ECODE_INVAL)
    online = sorted(n.name for n in cfg.get_all_nodes_info().values() if not n.offline)
    results = lu.require_rpc().call_export_list(online) if online else {}
    for name in online:
        res = results.get(name)
        if res is not None and not res.failed and op.src_path in (res.payload or []):
            node = expand_node(cfg, name)
            op.src_node, op.src_node_uuid = node.name, node.uuid
            return
    raise errors.OpPrereqError(f"No export found for relative path {op.src_path}",
                               errors.ECODE_INVAL)


def _known_params(lu: LogicalUnit[Any], namespace: str, values: dict[str, str],
                  subtype: str | None) -> dict[str, Any]:
    """The export's parameters that this cluster knows and accepts, one by one."""
    known: dict[str, Any] = {}
    for key, value in values.items():
        if value in ("", "None"):
            continue
        try:
            known.update(parameters.check_params(namespace, {key: value}, subtype))
        except errors.ParameterError as exc:
            lu.LogWarning(f"Ignoring parameter {exportinfo.excerpt(key)}="
                          f"'{exportinfo.excerpt(value)}' of the export:"
                          f" {exportinfo.excerpt(str(exc), 200)}")
    return known


def _nics(info: exportinfo.ExportInfo) -> list[dict[str, Any]]:
    nics = []
    for nic in info.nics:
        spec: dict[str, Any] = {k: v for k, v in (("mac", nic.mac), ("ip", nic.ip),
                                                  ("name", nic.name)) if v is not None}
        if nic.network:
            spec["network"] = nic.network   # mode and link come from the network
        else:
            spec.update({k: v for k, v in nic.nicparams.items() if k in ("mode", "link")})
        nics.append(spec)
    return nics


def _identify_defaults(lu: LogicalUnit[OpInstanceCreate], hv: str) -> None:
    """Drop the hypervisor and backend parameters equal to the cluster's defaults."""
    op, cluster = lu.op, lu.cfg.get_cluster_info()
    for given, defaults in ((op.hvparams, parameters.fill_hvparams(cluster, hv)),
                            (op.beparams, parameters.fill_beparams(cluster))):
        try:
            typed = parameters.check_params("hv" if given is op.hvparams else "be", given,
                                            hv if given is op.hvparams else None)
        except errors.ParameterError:
            continue   # CheckPrereq reports it
        for key, value in typed.items():
            if key in defaults and defaults[key] == value:
                del given[key]


@dataclass(frozen=True)
class ImportImage:
    """The image of one disk: ``file`` of export ``export`` (a name or canonical path),
    and the SHA-256 its ``config.ini`` records (None: not recorded)."""

    export: str
    file: str
    sha256: str | None = None

    @property
    def label(self) -> str:
        """``export NAME, file FILE`` for messages."""
        return f"export {self.export}, file {self.file}"

    @property
    def path(self) -> str:
        """The canonical path of the image (for the hooks' ``INSTANCE_SRC_IMAGES``)."""
        base = self.export if self.export.startswith("/") \
            else posixpath.join(EXPORT_DIR, self.export)
        return posixpath.join(base, self.file)

    def source(self) -> dict[str, Any]:
        """The ``impexp_send`` source (:func:`ganeti.backend.impexp.open_export_file`)."""
        return {"kind": "file", "export": self.export, "file": self.file}


def read_export(lu: LogicalUnit[OpInstanceCreate]
                ) -> tuple[list[ImportImage | None], str, str | None]:
    """Find and read the export, fill the opcode from it; the image per new disk,
    the name the instance had when it was exported, and its UEFI/TPM state.

    Raises :class:`errors.OpPrereqError` when there is no (valid) export.
    """
    op = lu.op
    _find_source(lu)
    assert op.src_node is not None and op.src_path is not None
    text = lu.require_rpc().call_export_info(
        op.src_node, path=op.src_path,
    ).one(op.src_node, f"No export or invalid export found in {op.src_path} on"
                   f" {op.src_node}")
    try:
        info = exportinfo.parse(text)
    except errors.ConfigurationError as exc:
        raise errors.OpPrereqError(f"Invalid export in {op.src_path} on {op.src_node}: {exc}",
                                   errors.ECODE_INVAL) from None
    lu.LogInfo(f"Importing instance {exportinfo.excerpt(info.name, 100)} exported from"
               f" {exportinfo.excerpt(info.source, 100) or '?'}")
    op.os_type = op.os_type or info.os or None
    op.disk_template = op.disk_template or info.disk_template
    if not op.disks:
        op.disks = [{"size": d.size, **({"name": d.name} if d.name else {})} for d in info.disks]
    if not op.nics:
        op.nics = _nics(info)
    if not op.tags:
        op.tags = list(info.tags)
    if op.hypervisor is None and info.hypervisor:
        op.hypervisor = info.hypervisor
    hv = op.hypervisor or lu.cfg.get_cluster_info().primary_hypervisor
    for key, value in _known_params(lu, "hv", info.hvparams, hv).items():
        op.hvparams.setdefault(key, value)
    for key, value in _known_params(lu, "be", info.beparams, None).items():
        op.beparams.setdefault(key, value)
    for key, value in info.osparams.items():
        op.osparams.setdefault(key, value)
    for key, value in info.osparams_private.items():
        op.osparams_private.setdefault(key, Private(value))
    if op.identify_defaults:
        _identify_defaults(lu, hv)
    images: list[ImportImage | None] = []
    for idx in range(len(op.disks)):
        disk = info.disks[idx] if idx < len(info.disks) else None
        if disk is None or disk.dump is None:
            images.append(None)
            continue
        if disk.sha256 is None:
            lu.LogWarning(f"Export {op.src_path}: config.ini records no checksum for disk"
                          f" {idx} (an export written without checksums); its image"
                          f" {disk.dump} cannot be verified")
        images.append(ImportImage(export=op.src_path, file=disk.dump, sha256=disk.sha256))
    return images, info.name, info.firmware_state


def import_disks(lu: LogicalUnit[OpInstanceCreate], inst: Instance,
                 images: list[ImportImage | None], pnode: str, feedback_fn: FeedbackFn) -> None:
    """Stream each export image into its new disk on ``pnode`` (see the module docstring).

    The receiving node refuses an image larger than its disk and one whose
    SHA-256 differs from the recorded one; the transfer then fails and the
    create LU removes the new disks and the instance again.
    """
    op = lu.op
    assert op.src_node is not None
    data = with_secret_osparams(instance_rpc_dict(lu.cfg, inst), op.osparams_secret)
    transfers = []
    for idx, image in enumerate(images):
        if image is None:
            lu.LogWarning(f"The export has no image for disk {idx}; it stays empty")
            continue
        dest = {"kind": "import", "instance": data, "index": idx,
                "label": f"disk/{idx} ({image.label})", "sha256": image.sha256}
        transfers.append(Transfer(label=f"disk/{idx}", src_node=op.src_node,
                                  source=image.source(), dst_node=pnode, dest=dest,
                                  op="import", instance=inst.name))
    run_transfers(lu, transfers, feedback_fn)
    if inst.disk_template == constants.DT_DISKLESS:
        feedback_fn("Diskless instance: no disk data to import")
