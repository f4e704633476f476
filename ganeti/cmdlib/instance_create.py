"""OP_INSTANCE_CREATE: add an instance (disks, config entry, OS install, start).

Checks everything before changing anything: the name, the nodes, the
template, the parameters (typed tables), the MACs and the OS (through
``os_validate`` on the primary node).  With ``name_check`` the name must
resolve (the instance gets the resolved FQDN, ``ip=auto`` NICs its
address); with ``ip_check`` that address must not answer on the network
(:func:`check_instance_name`, :func:`check_ip_free`, shared with rename).
In Exec, whatever was created is removed again if a later step fails (disk
creation, OS install); a start failure leaves the installed instance
stopped (as upstream) and fails the job.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any

from ganeti import constants, errors, ipolicy, locking, parameters
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import (allocator, backup_remote, disk_wipe, drbd, firmware_state,
                           instance_import, instance_remote_import, lvm, os_image, policy)
from ganeti.cmdlib import instance_communication as communication
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance import (add_instance_lock, check_device_names, check_node_online,
                                    check_node_usable, file_logical_id, instance_hook_env,
                                    instance_rpc_dict, remove_instance_lock, storage_dir_for,
                                    with_secret_osparams)
from ganeti.cmdlib.common import expand_node, read_domain_secret
from ganeti.cmdlib.instance_networks import IP_POOL, attach_networks, check_routed, find_network
from ganeti.config import ConfigReader, ConfigWriter
from ganeti.config.netusers import Holding
from ganeti.objects import NIC, Cluster, Disk, Instance, Node, NodeGroup
from ganeti.opcodes import instance as opcodes_instance
from ganeti.opcodes.instance import OpInstanceCreate
from ganeti.private import reveal
from ganeti.rpc.client import default_noded_port
from ganeti.utils import net as netutils
from ganeti.utils import units
from ganeti.utils import validation

__all__ = ["LUInstanceCreate", "SUPPORTED_TEMPLATES", "check_disk_specs", "check_spindles",
           "build_nics", "check_instance_name", "check_ip_free", "IP_CHECK_TIMEOUT"]

SUPPORTED_TEMPLATES = frozenset([constants.DT_DISKLESS, constants.DT_FILE,
                                 constants.DT_SHARED_FILE, constants.DT_PLAIN,
                                 constants.DT_DRBD8])
_MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
_MAC_AUTO = ("auto", "generate", None, "")
#: seconds the IP check waits for the address to answer (a lost SYN is
#: resent after 1 s, then 3 s: two tries)
IP_CHECK_TIMEOUT = 5.0


def check_instance_name(lu: LogicalUnit, name: str) -> tuple[str, str]:
    """The name check: resolve ``name``; returns ``(fqdn, ip)``.

    The resolved name must be ``name`` itself or ``name`` plus a domain
    (``web1`` -> ``web1.example.com``), as in Ganeti.  Raises
    :class:`errors.OpPrereqError`: ``ECODE_RESOLVER`` when the name does not
    resolve, ``ECODE_INVAL`` when it resolves to something else.
    """
    try:
        fqdn, ip = netutils.resolve_hostname(name)
    except errors.ResolverError as exc:
        raise errors.OpPrereqError(f"Cannot resolve instance name {exc} (use --no-name-check"
                                   " to skip the check)", errors.ECODE_RESOLVER) from None
    given = name.lower()
    if fqdn != given and not fqdn.startswith(given + "."):
        raise errors.OpPrereqError(f"Resolved hostname '{fqdn}' does not look the same as"
                                   f" given hostname '{name}' (use --no-name-check to skip"
                                   " the check)", errors.ECODE_INVAL)
    if fqdn != given:
        lu.LogInfo(f"Resolved given name '{name}' to '{fqdn}'")
    return fqdn, ip


def check_ip_free(ip: str, name: str) -> None:
    """The IP check: refuse (``ECODE_NOTUNIQUE``) if something answers at ``ip``.

    A TCP connect to the node daemon port that is accepted or refused means
    a live host owns the address (:func:`ganeti.utils.net.tcp_ping`).
    """
    if netutils.tcp_ping(ip, default_noded_port(), IP_CHECK_TIMEOUT):
        raise errors.OpPrereqError(f"IP address {ip} of instance {name} already in use"
                                   " (use --no-ip-check to skip the check)",
                                   errors.ECODE_NOTUNIQUE)


def check_disk_specs(template: str, disks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate disk dicts ``{size, mode, name}``; return normalised copies."""
    if template == constants.DT_DISKLESS:
        if disks:
            raise errors.OpPrereqError("Diskless instances cannot have disks",
                                       errors.ECODE_INVAL)
        return []
    if not disks:
        raise errors.OpPrereqError(f"Disk template {template} needs at least one disk",
                                   errors.ECODE_INVAL)
    result = []
    for idx, spec in enumerate(disks):
        if not isinstance(spec, dict):
            raise errors.OpPrereqError(f"Disk {idx}: expected a dict", errors.ECODE_INVAL)
        unknown = set(spec) - {"size", "mode", "name", "vg", "spindles", "provider"}
        if unknown:
            raise errors.OpPrereqError(f"Disk {idx}: unknown parameter(s) {sorted(unknown)}",
                                       errors.ECODE_INVAL)
        size = spec.get("size")
        if isinstance(size, str):
            try:
                size = units.parse_unit(size)
            except errors.UnitParseError:
                raise errors.OpPrereqError(f"Disk {idx}: invalid size {spec.get('size')!r}",
                                           errors.ECODE_INVAL) from None
        if (not isinstance(size, int) or isinstance(size, bool)
                or not 0 < size <= opcodes_instance.MAX_DISK_SIZE):
            raise errors.OpPrereqError(f"Disk {idx}: invalid size {spec.get('size')!r}"
                                       " (must be a positive number of MiB, at most"
                                       f" {opcodes_instance.MAX_DISK_SIZE})", errors.ECODE_INVAL)
        mode = spec.get("mode") or constants.DISK_RDWR
        if mode not in (constants.DISK_RDWR, constants.DISK_RDONLY):
            raise errors.OpPrereqError(f"Disk {idx}: invalid mode {mode!r}", errors.ECODE_INVAL)
        name = spec.get("name")
        if isinstance(name, str) and name.lower() in ("", "none"):
            name = None                 # as Ganeti: name=none is no name
        entry = {"size": size, "mode": mode, "name": name}
        if template in constants.DTS_LVM:
            entry.update(_lvm_disk_params(idx, spec))
        result.append(entry)
    return result


def check_spindles(specs: list[dict[str, Any]], excl_stor: bool, *,
                   required: bool = True) -> None:
    """As Ganeti: ``spindles`` in disk specs only with exclusive storage, and then
    (``required``: new LVM disks, not recreated ones) in every spec.

    ``excl_stor``: the ``exclusive_storage`` node parameter of any of the
    instance's nodes.  :class:`errors.OpPrereqError` (``ECODE_INVAL``).
    """
    for idx, spec in enumerate(specs):
        given = isinstance(spec, dict) and spec.get("spindles") is not None
        if given and not excl_stor:
            raise errors.OpPrereqError(f"Disk {idx}: spindles can be given only when"
                                       " exclusive storage is active (node parameter"
                                       " exclusive_storage)", errors.ECODE_INVAL)
        if required and excl_stor and not given:
            raise errors.OpPrereqError(f"Disk {idx}: spindles must be given when exclusive"
                                       " storage is active", errors.ECODE_INVAL)


def _lvm_disk_params(idx: int, spec: dict[str, Any]) -> dict[str, Any]:
    """``vg`` and ``spindles`` of an LVM disk spec, when given (checked)."""
    extra: dict[str, Any] = {}
    if spec.get("vg"):
        try:
            extra["vg"] = validation.check_vg_name(spec["vg"])
        except errors.OpPrereqError as exc:
            raise errors.OpPrereqError(f"Disk {idx}: {exc}", errors.ECODE_INVAL) from None
    spindles = spec.get("spindles")
    if spindles is not None:
        if not isinstance(spindles, int) or isinstance(spindles, bool) or spindles < 1:
            raise errors.OpPrereqError(f"Disk {idx}: invalid spindles {spindles!r} (a"
                                       " positive number)", errors.ECODE_INVAL)
        extra["spindles"] = spindles
    return extra


def build_nics(cfg: ConfigWriter, specs: list[dict[str, Any]], *, generate: bool = True,
               auto_ip: str | None = None, generated: list[str] | None = None) -> list[NIC]:
    """NIC objects from dicts ``{mac, ip, mode, link, name, network}``.

    ``ip`` ``auto`` takes ``auto_ip`` (the address the instance name
    resolved to); without one (no name check) it is refused.  ``network``
    (a name) and ``ip`` ``pool`` are kept as given:
    :func:`ganeti.cmdlib.instance_networks.attach_networks` resolves them.  MACs
    generated (and so reserved) are appended to ``generated`` as they are
    made, also when a later NIC is refused: the caller releases them
    (:meth:`ConfigWriter.release_macs`).
    """
    nics = []
    for idx, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise errors.OpPrereqError(f"NIC {idx}: expected a dict", errors.ECODE_INVAL)
        unknown = set(spec) - {"mac", "ip", "mode", "link", "name", "network", "vlan", "bridge"}
        if unknown:
            raise errors.OpPrereqError(f"NIC {idx}: unknown parameter(s) {sorted(unknown)}",
                                       errors.ECODE_INVAL)
        nicparams = {k: spec[k] for k in ("mode", "link", "vlan") if spec.get(k) is not None}
        if spec.get("bridge"):
            nicparams["link"] = spec["bridge"]
        nicparams = parameters.check_params("nic", nicparams)
        mac = spec.get("mac")
        if mac in _MAC_AUTO:
            mac = cfg.generate_mac() if generate else ""
            if mac and generated is not None:
                generated.append(mac)
        else:
            mac = str(mac).lower()
            if not _MAC_RE.match(mac):
                raise errors.OpPrereqError(f"NIC {idx}: invalid MAC address {spec['mac']!r}",
                                           errors.ECODE_INVAL)
        ip = spec.get("ip")
        if ip in ("", "none", None):
            ip = None
        elif isinstance(ip, str) and ip.lower() == IP_POOL:
            ip = IP_POOL
        elif isinstance(ip, str) and ip.lower() == "auto":
            if auto_ip is None:
                raise errors.OpPrereqError(f"NIC {idx}: ip=auto needs the instance name check"
                                           " (the address comes from resolving the name);"
                                           " give the address instead", errors.ECODE_INVAL)
            ip = auto_ip
        elif not isinstance(ip, str) or not re.match(r"^[0-9a-fA-F:.]+$", ip):
            raise errors.OpPrereqError(f"NIC {idx}: invalid IP address {ip!r}",
                                       errors.ECODE_INVAL)
        network = spec.get("network")
        if network is not None and (not isinstance(network, str)
                                    or network.lower() in ("", "none")):
            network = None
        name = spec.get("name")
        nics.append(NIC(mac=mac, ip=ip, network=network, nicparams=nicparams,
                        name=None if isinstance(name, str) and name.lower() in ("", "none")
                        else name))
    return nics


class LUInstanceCreate(LogicalUnit[OpInstanceCreate]):
    """Create an instance; returns the list of its node names."""

    HPATH = "instance-add"
    HTYPE = constants.HTYPE_INSTANCE
    REQ_BGL = False

    def CheckArguments(self) -> None:
        op = self.op
        #: MACs generated for the NICs, released when the LU ends
        self.generated_macs: list[str] = []
        #: network addresses handed out for the NICs, released when the LU ends
        self.held_ips: list[Holding] = []
        #: import mode: the image (canonical path on src_node) per disk
        self.src_images: list[instance_import.ImportImage | None] = []
        #: import mode: the export's UEFI NVRAM and TPM state (doc/kvm.md)
        self.src_firmware: str | None = None
        #: remote-import mode: the source's transfer certificate (PEM)
        self.source_ca = ""
        #: both import modes: the instance's name where it came from (the OS rename
        #: script runs with it after the import, as Ganeti's)
        self.rename_from = op.source_instance_name or ""
        if op.mode == constants.INSTANCE_REMOTE_IMPORT:
            self.source_ca = backup_remote.check_remote_import(
                read_domain_secret(self.context.paths), op)
            if op.compress != "none":
                raise errors.OpPrereqError(f"Compression '{op.compress}' is not supported"
                                           " (only 'none')", errors.ECODE_INVAL)
        if op.ip_check and not op.name_check:
            # the IP address to check comes from resolving the name
            raise errors.OpPrereqError("Cannot do an IP address check without a name check"
                                       " (use --no-ip-check too)", errors.ECODE_INVAL)
        try:
            validation.check_hostname(op.instance_name)
        except errors.GanetiError as exc:
            raise errors.OpPrereqError(f"Invalid instance name '{op.instance_name}': {exc}",
                                       errors.ECODE_INVAL) from None
        if op.mode != constants.INSTANCE_IMPORT:
            if op.disk_template is None:
                op.disk_template = self._default_template()
            self._check_template_args()   # an import reads them from the export first
        if op.mode == constants.INSTANCE_REMOTE_IMPORT \
                and op.disk_template not in constants.DTS_INT_MIRROR:
            op.snode = None   # upstream's move-instance names one for every template
        if op.pnode is not None and op.iallocator:
            raise errors.OpPrereqError("Give either a primary node or an iallocator, not both",
                                       errors.ECODE_INVAL)
        #: None: the allocator picks the node in CheckPrereq (op.iallocator, the
        #: cluster's default_iallocator, or the built-in one)
        self.pnode_name = op.pnode
        #: DRBD reservations (node_a, node_b, port, minor_a, minor_b), released at the end
        self.drbd_reserved: list[tuple[str, str, int, int, int]] = []
        self.snode: Node | None = None
        mirrored = op.disk_template in constants.DTS_INT_MIRROR
        if op.snode is not None and not mirrored and op.mode != constants.INSTANCE_IMPORT:
            raise errors.OpPrereqError(f"Disk template {op.disk_template or '?'} takes no"
                                       " secondary node", errors.ECODE_INVAL)
        if mirrored and op.pnode is not None and op.snode is None:
            raise errors.OpPrereqError(f"Disk template {op.disk_template} needs a secondary"
                                       " node (-n PNODE:SNODE), or an iallocator",
                                       errors.ECODE_INVAL)
        if op.snode is not None and op.snode == op.pnode:
            raise errors.OpPrereqError("The secondary node must differ from the primary"
                                       " node", errors.ECODE_INVAL)
        if op.file_driver and op.file_driver not in ("loop", "blktap", "blktap2"):
            raise errors.OpPrereqError(f"Invalid file driver '{op.file_driver}'",
                                       errors.ECODE_INVAL)
        for tag in op.tags:
            validation.check_tag(tag)
        # last (the only check with I/O); before the name is locked, and the
        # job keeps the resolved name
        self.check_ip: str | None = None
        if op.name_check:
            op.instance_name, self.check_ip = check_instance_name(self, op.instance_name)
        if op.mode != constants.INSTANCE_IMPORT:
            self._add_communication_nic()

    def _add_communication_nic(self) -> None:
        """With ``instance_communication``, the NIC ``ganeti:communication:NAME`` on
        the cluster's instance communication network joins ``op.nics`` (refused when
        the cluster has none); an import adds it after reading the export's NICs."""
        op = self.op
        if op.instance_communication:
            op.nics = communication.create_nics(
                op.nics, op.instance_name,
                self.cfg.get_cluster_info().instance_communication_network)

    def _default_template(self) -> str:
        """The template of a creation that names none: the cluster's first enabled
        one (as Ganeti does); :class:`errors.OpPrereqError` when none is enabled."""
        enabled = self.cfg.get_cluster_info().enabled_disk_templates
        if not enabled:
            raise errors.OpPrereqError("No disk template given and none is enabled in the"
                                       " cluster", errors.ECODE_STATE)
        return enabled[0]

    def _check_template_args(self) -> None:
        op = self.op
        if op.disk_template not in SUPPORTED_TEMPLATES:
            raise errors.OpPrereqError(
                f"Disk template '{op.disk_template}' is not supported (supported:"
                f" {', '.join(sorted(SUPPORTED_TEMPLATES))})", errors.ECODE_INVAL)
        self.disk_specs = check_disk_specs(op.disk_template, op.disks)
        check_device_names("disk", [(None, spec["name"]) for spec in self.disk_specs])
        check_device_names("NIC", [(None, nic.get("name")) if isinstance(nic, dict)
                                   else (None, None) for nic in op.nics])
        if op.mode == constants.INSTANCE_CREATE and not op.no_install and not op.os_type \
                and not os_image.image_of(op.osparams or {}):
            raise errors.OpPrereqError("No OS given (use os_type, the OS parameter os-image,"
                                       " or no_install)", errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        if self.cfg.get_instance_info_by_name(self.op.instance_name) is not None:
            raise errors.OpPrereqError(f"Instance '{self.op.instance_name}' is already in the"
                                       " cluster", errors.ECODE_EXISTS)
        if self.pnode_name is None:
            node_locks: Any = locking.ALL_SET
        else:
            self.pnode = expand_node(self.cfg, self.pnode_name)
            self.op.pnode = self.pnode.name
            node_locks = [self.pnode.uuid]
            if self.op.snode is not None:
                self.snode = expand_node(self.cfg, self.op.snode)
                self.op.snode = self.snode.name
                if self.snode.uuid == self.pnode.uuid:
                    raise errors.OpPrereqError("The secondary node must differ from the"
                                               " primary node", errors.ECODE_INVAL)
                node_locks.append(self.snode.uuid)
        add_instance_lock(self, self.op.instance_name)
        self.needed_locks = {locking.LEVEL_INSTANCE: [self.op.instance_name],
                             locking.LEVEL_NODE: node_locks,
                             locking.LEVEL_NODE_RES: node_locks}
        self.share_locks = {locking.LEVEL_NODE: 1, locking.LEVEL_NODE_RES: 1}

    def release_reservations(self) -> None:
        """Release the MACs generated for the NICs (in use by now, or free again)."""
        if self.generated_macs:
            self.cfg.release_macs(self.generated_macs)
            self.generated_macs = []
        if self.held_ips:
            self.cfg.release_ips(self.held_ips)
            self.held_ips = []
        if self.drbd_reserved:
            self.cfg.release_drbd(self.drbd_reserved)
            self.drbd_reserved = []

    def CheckPrereq(self) -> None:
        try:
            self._check_prereq()
        except BaseException:
            remove_instance_lock(self, self.op.instance_name)
            raise

    def _check_prereq(self) -> None:
        op, cfg = self.op, self.cfg
        if op.mode == constants.INSTANCE_IMPORT:
            self.src_images, self.rename_from, self.src_firmware = \
                instance_import.read_export(self)
            self._add_communication_nic()
            self._check_template_args()
        cluster = cfg.get_cluster_info()
        if cfg.get_instance_info_by_name(op.instance_name) is not None:
            raise errors.OpPrereqError(f"Instance '{op.instance_name}' is already in the"
                                       " cluster", errors.ECODE_EXISTS)
        if cfg.get_node_info_by_name(op.instance_name) is not None:
            raise errors.OpPrereqError(f"Name '{op.instance_name}' is used by a node",
                                       errors.ECODE_EXISTS)
        if self.pnode_name is None:
            self._allocate_node()
        pnode = cfg.get_node_info(self.pnode.uuid)
        if pnode is None:
            raise errors.OpPrereqError(f"Node '{op.pnode}' not known", errors.ECODE_NOENT)
        check_node_online(pnode)
        if pnode.drained:
            raise errors.OpPrereqError(f"Can't use drained node {pnode.name}", errors.ECODE_STATE)
        if not pnode.vm_capable:
            raise errors.OpPrereqError(f"Node {pnode.name} is not vm_capable", errors.ECODE_STATE)
        if op.disk_template in constants.DTS_INT_MIRROR:
            self._check_snode(pnode)
        if op.disk_template not in cluster.enabled_disk_templates:
            raise errors.OpPrereqError(
                f"Disk template '{op.disk_template}' is not enabled in the cluster (enabled:"
                f" {', '.join(cluster.enabled_disk_templates)})", errors.ECODE_STATE)
        hv = op.hypervisor or cluster.primary_hypervisor
        if hv not in cluster.enabled_hypervisors:
            raise errors.OpPrereqError(f"Hypervisor '{hv}' is not enabled in the cluster",
                                       errors.ECODE_STATE)
        self.hv = hv
        try:
            self.beparams = parameters.check_params("be", op.beparams)
            self.hvparams = parameters.check_params("hv", op.hvparams, hv)
            self.osparams = parameters.check_params("os", op.osparams)
        except errors.ParameterError as exc:
            raise errors.OpPrereqError(str(exc), errors.ECODE_INVAL) from None
        self.nics = build_nics(cfg, op.nics, auto_ip=self.check_ip,
                               generated=self.generated_macs)
        attach_networks(cfg, self.nics, op.nics,
                        cfg.get_nodegroup(pnode.group) or NodeGroup(name=pnode.group),
                        check=op.conflicts_check, held=self.held_ips,
                        generated=self.generated_macs)
        check_routed(cluster, self.nics)
        seen: set[str] = set()
        for nic in self.nics:
            if nic.mac in seen or cfg.is_mac_in_use(nic.mac):
                raise errors.OpPrereqError(f"MAC address {nic.mac} already in use",
                                           errors.ECODE_NOTUNIQUE)
            seen.add(nic.mac)
        self._check_ipolicy(cluster, pnode)
        inst = Instance(name=op.instance_name, primary_node=pnode.uuid, os=op.os_type or "",
                        hypervisor=hv, disk_template=op.disk_template, nics=self.nics,
                        hvparams=self.hvparams, beparams=self.beparams, osparams=self.osparams,
                        osparams_private=reveal(op.osparams_private), tags=list(op.tags),
                        admin_state=constants.ADMINST_DOWN)
        check_spindles(op.disks, any(
            lvm.exclusive_storage(cluster, node, cfg.get_nodegroup(node.group))
            for node in (pnode, self.snode) if node is not None),
            required=op.disk_template in constants.DTS_LVM)
        self.new_disks: list[Disk] = []
        storage_dir = None
        if op.disk_template in constants.DTS_FILEBASED:
            paths = getattr(self.context, "paths", None)
            storage_dir = storage_dir_for(cluster, op.disk_template, op.file_storage_dir,
                                          paths.root if paths is not None else None)
        for idx, spec in enumerate(self.disk_specs):
            uuid = str(uuidlib.uuid4())
            logical_id: list[Any] = []
            if storage_dir is not None:
                logical_id = file_logical_id(storage_dir, op.instance_name, uuid, idx,
                                             op.file_driver or "loop")
            elif op.disk_template == constants.DT_PLAIN:
                logical_id = lvm.lv_logical_id(lvm.disk_vg(cluster, spec), uuid, idx)
            elif op.disk_template == constants.DT_DRBD8:
                self.new_disks.append(self._new_drbd_disk(cluster, pnode, spec, uuid, idx))
                continue
            self.new_disks.append(Disk(uuid=uuid, dev_type=op.disk_template, size=spec["size"],
                                       mode=spec["mode"], name=spec["name"],
                                       logical_id=logical_id, iv_name=f"disk/{idx}",
                                       nodes=[pnode.uuid], spindles=spec.get("spindles")))
        self.new_inst = inst
        self.excl_stor = False
        if op.disk_template == constants.DT_PLAIN:
            # the volume groups must exist on the node and have room: nothing is made otherwise
            lvm.check_vg_free(self, [pnode], lvm.required_vg_sizes(
                (d.logical_id[0], d.size) for d in self.new_disks))
            self.excl_stor = lvm.exclusive_storage(cluster, pnode,
                                                   cfg.get_nodegroup(pnode.group))
        elif op.disk_template == constants.DT_DRBD8:
            assert self.snode is not None
            lvm.check_vg_free(self, [pnode, self.snode], lvm.required_vg_sizes(
                (c.logical_id[0], c.size) for d in self.new_disks for c in d.children))
        if op.ip_check and self.check_ip is not None:
            check_ip_free(self.check_ip, op.instance_name)
        #: image-based install (doc/images.md): the OS parameter os-image
        self.os_image = os_image.image_of(self.osparams) \
            if op.mode == constants.INSTANCE_CREATE and not op.no_install else None
        os_image.check_store_name(os_image.image_of(self.osparams), self.context.paths)
        os_image.check_seed_params(self.osparams)
        os_image.check_cloud_init_source(
            parameters.fill_hvparams(cluster, hv, self.hvparams, os_name=op.os_type or None),
            self.osparams, [nic.ip for nic in self.nics])
        if self.os_image is not None:
            if not self.new_disks or op.disk_template == constants.DT_DISKLESS:
                raise errors.OpPrereqError("An OS image needs a disk to be written to",
                                           errors.ECODE_INVAL)
            os_image.check_local_image(self.os_image, self.osparams.get(
                os_image.CHECKSUM_PARAM), self.new_disks[0].size, self.context.paths)
        if op.os_type and self.rpc is not None:
            full = os_image.without_image_params(
                parameters.fill_osparams(cluster, op.os_type, self.osparams))
            hidden = {**reveal(op.osparams_private), **reveal(op.osparams_secret)}
            res = self.rpc.call_os_validate(
                [pnode.name], required=True, osname=op.os_type, checks=["parameters"], osparams=full,
                osparams_private=hidden).get(pnode.name)
            if res is None or res.failed:
                msg = res.fail_msg if res is not None else "no answer"
                raise errors.OpPrereqError(f"OS '{op.os_type}' not usable on node {pnode.name}:"
                                           f" {msg}", errors.ECODE_INVAL)

    def _check_snode(self, pnode: Node) -> None:
        """The secondary node of a mirrored template: known, online, usable, not the primary."""
        if self.snode is None:
            raise errors.OpPrereqError(f"Disk template {self.op.disk_template} needs a"
                                       " secondary node", errors.ECODE_INVAL)
        snode = self.cfg.get_node_info(self.snode.uuid)
        if snode is None:
            raise errors.OpPrereqError(f"Node '{self.op.snode}' not known", errors.ECODE_NOENT)
        if snode.uuid == pnode.uuid:
            raise errors.OpPrereqError("The secondary node must differ from the primary node",
                                       errors.ECODE_INVAL)
        check_node_usable(snode, " as secondary node")
        self.snode = snode

    def _new_drbd_disk(self, cluster: Cluster, pnode: Node, spec: dict[str, Any], uuid: str,
                       idx: int) -> Disk:
        """A new DRBD disk between the primary and the secondary: port, minors reserved."""
        assert self.snode is not None
        try:
            port, pminor, sminor = self.cfg.allocate_drbd(pnode.uuid, self.snode.uuid)
        except errors.ConfigurationError as exc:
            raise errors.OpPrereqError(str(exc), errors.ECODE_NORES) from None
        self.drbd_reserved.append((pnode.uuid, self.snode.uuid, port, pminor, sminor))
        return drbd.make_drbd_disk(
            uuid=uuid, index=idx, size=spec["size"], vg=lvm.disk_vg(cluster, spec),
            mode=spec["mode"], name=spec["name"], nodes=(pnode.uuid, self.snode.uuid),
            port=port, minors=(pminor, sminor), secret=drbd.new_secret(),
            child_uuids=(str(uuidlib.uuid4()), str(uuidlib.uuid4())),
            spindles=spec.get("spindles"))

    def _allocator_nic(self, spec: Any) -> Any:
        """A NIC spec for the allocator: its network named by UUID (as the node groups'
        connections are), so that only connected groups are chosen."""
        if not isinstance(spec, dict) or not isinstance(spec.get("network"), str):
            return spec
        net = find_network(self.cfg, spec["network"])
        return {**spec, "network": net.uuid} if net is not None else spec

    def _allocate_node(self) -> None:
        """Ask the allocator for the primary node (all node locks are held, shared)."""
        op, cluster = self.op, self.cfg.get_cluster_info()
        assert op.disk_template is not None  # set by the op or, for an import, by the export
        request = allocator.allocate_request_for(
            cluster, name=op.instance_name, disk_template=op.disk_template,
            disks=self.disk_specs, nics=[self._allocator_nic(n) for n in op.nics],
            beparams=op.beparams,
            os_name=op.os_type or "", tags=list(op.tags),
            hypervisor=op.hypervisor or cluster.primary_hypervisor, group_name=op.group_name)
        answer, _ = allocator.ask(self, op.iallocator, request)
        name = allocator.allocator_name(self, op.iallocator) or "ganeti-iallocator"
        answer.require_success(name)
        self.pnode = expand_node(self.cfg, answer.nodes[0])
        op.pnode = self.pnode.name
        if op.disk_template in constants.DTS_INT_MIRROR:
            if len(answer.nodes) < 2:
                raise errors.OpPrereqError(f"Allocator {op.iallocator or 'hail'} gave no"
                                           " secondary node", errors.ECODE_NORES)
            self.snode = expand_node(self.cfg, answer.nodes[1])
            op.snode = self.snode.name
        self.LogInfo(f"Selected nodes for instance {op.instance_name} via iallocator {name}:"
                     f" {', '.join(answer.nodes)}")

    def _check_ipolicy(self, cluster: Cluster, pnode: Node) -> None:
        """Refuse a spec outside the primary node's group policy (doc/ipolicy.md)."""
        template = self.op.disk_template
        assert template is not None  # set by the op or, for an import, by the export
        be_full = parameters.fill_beparams(cluster, self.beparams)
        spec = policy.spec_from_values(be_full, [d["size"] for d in self.disk_specs],
                                       len(self.nics))
        ignored = policy.check_allocation(self.cfg, pnode.group, [spec], template,
                                          ignore=self.op.ignore_ipolicy)
        if ignored:
            self.LogWarning("Instance policy ignored: "
                            + ipolicy.format_violations(ignored))

    def BuildHooksEnv(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"INSTANCE_ADD_MODE": self.op.mode}
        if self.op.mode == constants.INSTANCE_IMPORT:
            extra.update({"INSTANCE_SRC_NODE": self.op.src_node,
                          "INSTANCE_SRC_PATH": self.op.src_path,
                          "INSTANCE_SRC_IMAGES": " ".join(i.path if i else ""
                                                          for i in self.src_images)})
        return instance_hook_env(self.cfg, self.new_inst, self.new_disks, extra)

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        master = self.cfg.get_master_node_name()
        nodes = [n for n in (master, self.pnode.name) if n]
        return list(dict.fromkeys(nodes)), list(dict.fromkeys(nodes))

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        try:
            return self._exec(feedback_fn)
        except BaseException:
            if self.os_image is not None:
                # whatever failed (a wipe, a resync...), no staged image stays behind
                os_image.drop_staged(self, self.pnode.name, self.op.instance_name)
            if self.cfg.get_instance_info_by_name(self.op.instance_name) is None:
                remove_instance_lock(self, self.op.instance_name)
            raise

    def _disk_nodes(self, disk: Disk) -> list[str]:
        """Names of the nodes holding ``disk`` (a DRBD disk: secondary first)."""
        if disk.dev_type in constants.DTS_INT_MIRROR and self.snode is not None:
            return [self.snode.name, self.pnode.name]
        return [self.pnode.name]

    def _remove_disks(self, disks: list[Disk]) -> None:
        for disk in disks:
            if disk.dev_type == constants.DT_DISKLESS or self.rpc is None:
                continue
            for node in self._disk_nodes(disk):
                res = self.rpc.call_blockdev_remove(
                    [node], disk=instance_rpc_disk(disk, self.cfg)).get(node)
                if res is None or res.failed:
                    self.LogWarning(f"Could not remove disk {disk.iv_name} on {node}:"
                                    f" {res.fail_msg if res else 'no answer'}")

    def _shutdown_mirrors(self) -> None:
        """Take the new DRBD devices down on both nodes (the instance is not started)."""
        for disk in self.new_disks:
            if disk.dev_type not in constants.DTS_INT_MIRROR or self.rpc is None:
                continue
            for node in self._disk_nodes(disk)[::-1]:
                res = self.rpc.call_blockdev_shutdown(
                    [node], disk=instance_rpc_disk(disk, self.cfg)).get(node)
                if res is None or res.failed:
                    self.LogWarning(f"Could not shut down disk {disk.iv_name} on {node}:"
                                    f" {res.fail_msg if res else 'no answer'}")

    def _exec(self, feedback_fn: FeedbackFn) -> Any:
        op, cfg = self.op, self.cfg
        inst, pname = self.new_inst, self.pnode.name
        created: list[Disk] = []
        staged = None
        if self.os_image is not None:
            staged = os_image.stage_image(self, pname, inst.name, self.os_image,
                                          self.osparams.get(os_image.CHECKSUM_PARAM),
                                          self.new_disks[0].size, feedback_fn)
        try:
            for disk in self.new_disks:
                if disk.dev_type == constants.DT_DISKLESS:
                    continue
                created.append(disk)     # removal is idempotent: a half-made disk goes too
                for node in self._disk_nodes(disk):
                    feedback_fn(f"* creating disk {disk.iv_name} ({disk.size} MiB) on {node}")
                    self.require_rpc().call_blockdev_create(
                        node, disk=instance_rpc_disk(disk, cfg), size=disk.size,
                        owner_instance_name=inst.name, on_primary=node == pname,
                        info=constants.DISK_INFO_PREFIX + inst.name, excl_stor=self.excl_stor,
                    ).one(node, f"Can't create disk {disk.iv_name} on node {node}")
        except errors.GanetiError:
            self._remove_disks(created)
            if staged is not None:
                os_image.drop_staged(self, pname, inst.name)
            raise
        try:
            cfg.add_instance(inst, self.new_disks)
        except BaseException:
            # the configuration stays as it was (a failed write is undone): the new
            # volumes would be orphans, so they go too
            self._remove_disks(created)
            if staged is not None:
                os_image.drop_staged(self, pname, inst.name)
            raise
        self.release_reservations()     # the config holds the DRBD ports and minors now
        if op.disk_template in constants.DTS_INT_MIRROR and op.wait_for_sync:
            drbd.wait_for_sync(self, self.pnode, self.new_disks, feedback_fn, cfg=cfg,
                               instance=inst.name)
        if disk_wipe.wipe_wanted(self):
            try:
                disk_wipe.wipe_disks(self, pname, inst.name,
                                     [(i, d, 0) for i, d in enumerate(self.new_disks)],
                                     feedback_fn)
            except BaseException:
                self.LogWarning("Wiping the disks failed; removing the instance again")
                self._remove_disks(created)
                cfg.remove_instance(inst.uuid)
                raise
        if op.mode in (constants.INSTANCE_IMPORT, constants.INSTANCE_REMOTE_IMPORT):
            try:
                if op.mode == constants.INSTANCE_IMPORT:
                    instance_import.import_disks(self, inst, self.src_images, pname,
                                                 feedback_fn)
                    firmware_state.restore(self, inst, pname, self.src_firmware, feedback_fn)
                else:
                    instance_remote_import.remote_import_disks(
                        self, inst, self.pnode, self.source_ca, feedback_fn,
                        connect_timeout=backup_remote.CONNECT_TIMEOUT)
            except BaseException:
                self.LogWarning("Import failed; removing the instance again")
                self._remove_disks(created)
                cfg.remove_instance(inst.uuid)
                raise
            self._run_os_rename(inst, feedback_fn)
        else:
            if staged is not None:
                try:
                    os_image.write_image(self, pname, inst.name,
                                         instance_rpc_disk(self.new_disks[0], cfg), staged,
                                         feedback_fn)
                    os_image.build_seed(self, pname, inst, feedback_fn)
                except errors.GanetiError:
                    self.LogWarning("Writing the OS image failed; removing the instance again")
                    os_image.drop_staged(self, pname, inst.name)
                    self._remove_disks(created)
                    cfg.remove_instance(inst.uuid)
                    raise
            # with an image too, as Ganeti 3.0: the OS scripts run on the written disk
            if not op.no_install and op.os_type:
                self._run_os_create(inst, created, feedback_fn)
        if not op.start:
            self._shutdown_mirrors()
        if op.start:
            cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
            feedback_fn(f"* starting instance {inst.name} on {pname}")
            try:
                self.require_rpc().call_instance_start(
                    pname, instance=instance_rpc_dict(cfg, inst),
                    disks=instance_rpc_dict(cfg, inst)["disks_info"], startup_paused=False,
                ).one(pname, f"Could not start instance {inst.name}")
            except errors.GanetiError:
                cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN)
                raise
        return [pname]

    def _run_os_rename(self, inst: Instance, feedback_fn: FeedbackFn) -> None:
        """After an import: the OS rename script, from the instance's name where it came
        from (as Ganeti's, also when the name is the same); a failure only warns."""
        if not inst.os:
            return
        pname = self.pnode.name
        feedback_fn(f"Running rename script for {inst.name}")
        res = self.require_rpc().call_instance_run_rename(
            [pname], instance=with_secret_osparams(instance_rpc_dict(self.cfg, inst),
                                                   self.op.osparams_secret),
            old_name=self.rename_from or inst.name, debug=self.op.debug_level or 0).get(pname)
        if res is None or res.failed:
            self.LogWarning(f"Failed to run rename script for {inst.name} on node {pname}:"
                            f" {res.fail_msg if res else 'no answer'}")

    def _run_os_create(self, inst: Instance, created: list[Disk],
                       feedback_fn: FeedbackFn) -> None:
        """The OS create scripts; on failure the instance is removed again."""
        op, cfg, pname = self.op, self.cfg, self.pnode.name
        feedback_fn(f"* running the instance OS create scripts on {pname}")
        try:
            self.require_rpc().call_instance_os_add(
                pname,
                instance=with_secret_osparams(instance_rpc_dict(cfg, inst), op.osparams_secret),
                reinstall=False, debug=op.debug_level or 0,
            ).one(pname, f"Could not add OS to instance {inst.name}"
                    f" on node {pname}")
        except errors.GanetiError:
            self.LogWarning("OS installation failed; removing the instance again")
            self._remove_disks(created)
            cfg.remove_instance(inst.uuid)
            raise


def instance_rpc_disk(disk: Disk, cfg: ConfigReader | None = None) -> dict[str, Any]:
    """One disk as the node procedures take it (:func:`ganeti.cmdlib.drbd.rpc_disk`)."""
    return drbd.rpc_disk(disk, cfg)
