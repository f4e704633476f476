"""The cluster configuration as mutable dataclasses.

The root is :class:`ConfigData`; it holds the :class:`Cluster` and dicts of
nodes, node groups, instances, disks and networks keyed by UUID, exactly as
Ganeti's ``config.data`` (doc/protocols/config.md, "config.data").  Field names follow Ganeti.

These objects are owned by :class:`ganeti.config.ConfigWriter`; they are
mutable on purpose (an LU changes a working object and calls
``cfg.update(obj)``; readers get committed copies nobody changes, see
:mod:`ganeti.config`).  They go to and from JSON only through
:mod:`ganeti.serializer` (``to_data``/``from_data``).

Parameter dicts (``hvparams``, ``beparams``, ``nicparams``, ``ndparams``,
``diskparams``, ``osparams``) hold only what was customised at that level;
the effective values come from :mod:`ganeti.parameters`.  The cluster keeps
its instance defaults Ganeti-style: ``beparams`` and ``nicparams`` are
``{"default": {...}}``, ``hvparams`` is ``{hypervisor: {...}}``,
``os_hvp`` is ``{os: {hypervisor: {...}}}``, ``diskparams`` is
``{template: {...}}`` and ``osparams`` is ``{os: {...}}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, ipolicy

__all__ = ["PP_DEFAULT", "NIC", "Disk", "Instance", "Node", "NodeGroup",
           "Network", "Cluster", "ConfigData", "instance_all_nodes",
           "instance_secondary_nodes", "disk_tree", "default_ipolicy"]

# Key of the single profile in Cluster.beparams / Cluster.nicparams.
PP_DEFAULT = "default"


def default_ipolicy() -> dict[str, Any]:
    """The default instance policy (Ganeti's; see :func:`ganeti.ipolicy.default_ipolicy`)."""
    return ipolicy.default_ipolicy()


@dataclass
class NIC:
    """A network interface of an instance (stored inside the instance)."""

    uuid: str = ""
    mac: str = ""
    ip: str | None = None
    name: str | None = None
    network: str | None = None
    # only the customised mode/link/vlan; see parameters.fill_nicparams
    nicparams: dict[str, Any] = field(default_factory=dict)


@dataclass
class Disk:
    """A disk of an instance; stored in ``ConfigData.disks`` by UUID.

    ``dev_type`` is the disk template (``plain``, ``drbd``, ``file`` ...),
    ``size`` is in MiB, ``logical_id`` is template specific (e.g.
    ``[vg, lv_name]`` for plain, ``[driver, path]`` for file) and ``nodes``
    lists the UUIDs of the nodes holding the data (primary first).
    ``children`` are the disks this one is built on (a tree, as in Ganeti:
    a DRBD disk has its data and metadata volumes as children; plain and
    file disks have none; doc/storage.md, "The device model").
    """

    uuid: str = ""
    dev_type: str = constants.DT_PLAIN
    size: int = 0
    mode: str = constants.DISK_RDWR
    name: str | None = None
    logical_id: list[Any] = field(default_factory=list)
    iv_name: str = ""
    nodes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    spindles: int | None = None
    children: list[Disk] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


@dataclass
class Instance:
    """A virtual machine.

    ``disks`` lists disk UUIDs (the Disk objects live in
    ``ConfigData.disks``); ``disk_template`` is kept for convenience (the
    template of all its disks, or ``diskless``).  The nodes of an instance
    are its ``primary_node`` plus the nodes of its disks, see
    :func:`instance_all_nodes`.
    """

    name: str = ""
    uuid: str = ""
    primary_node: str = ""
    os: str = ""
    hypervisor: str = constants.HT_FAKE
    disk_template: str = constants.DT_DISKLESS
    admin_state: str = constants.ADMINST_DOWN
    admin_state_source: str = constants.ADMIN_SOURCE
    disks_active: bool = False
    nics: list[NIC] = field(default_factory=list)
    disks: list[str] = field(default_factory=list)
    hvparams: dict[str, Any] = field(default_factory=dict)
    beparams: dict[str, Any] = field(default_factory=dict)
    osparams: dict[str, str] = field(default_factory=dict)
    osparams_private: dict[str, str] = field(default_factory=dict)
    network_port: int | None = None
    tags: list[str] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


def disk_tree(disk: Disk) -> Iterator[Disk]:
    """``disk`` and every disk it is built on, parents first (a DRBD disk, then its
    data and metadata volumes)."""
    yield disk
    for child in disk.children:
        yield from disk_tree(child)


def instance_all_nodes(instance: Instance, disks: list[Disk]) -> list[str]:
    """UUIDs of every node of ``instance``: the primary first, then the rest.

    ``disks`` are the instance's Disk objects (``cfg.get_instance_disks``).
    """
    result = [instance.primary_node] if instance.primary_node else []
    for disk in disks:
        for node in disk.nodes:
            if node not in result:
                result.append(node)
    return result


def instance_secondary_nodes(instance: Instance, disks: list[Disk]) -> list[str]:
    """UUIDs of the nodes of ``instance`` other than its primary."""
    return [n for n in instance_all_nodes(instance, disks) if n != instance.primary_node]


@dataclass
class Node:
    """A physical (or virtual-cluster) node."""

    name: str = ""
    uuid: str = ""
    primary_ip: str = ""
    secondary_ip: str = ""
    group: str = ""
    master_candidate: bool = False
    master_capable: bool = True
    vm_capable: bool = True
    offline: bool = False
    drained: bool = False
    powered: bool = True
    ndparams: dict[str, Any] = field(default_factory=dict)
    hv_state_static: dict[str, Any] = field(default_factory=dict)
    disk_state_static: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


@dataclass
class NodeGroup:
    """A group of nodes sharing parameters and an allocation policy.

    ``members`` (node UUIDs) is kept in sync by the ConfigWriter from
    ``Node.group``; do not edit it by hand.
    """

    name: str = ""
    uuid: str = ""
    alloc_policy: str = constants.ALLOC_POLICY_PREFERRED
    members: list[str] = field(default_factory=list)
    ndparams: dict[str, Any] = field(default_factory=dict)
    diskparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    ipolicy: dict[str, Any] = field(default_factory=dict)
    networks: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


@dataclass
class Network:
    """An IP network instances' NICs can be connected to (minimal)."""

    name: str = ""
    uuid: str = ""
    network: str = ""
    gateway: str | None = None
    network6: str | None = None
    gateway6: str | None = None
    mac_prefix: str | None = None
    reservations: str = ""
    ext_reservations: str = ""
    tags: list[str] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


@dataclass
class Cluster:
    """Cluster-wide settings and the defaults instances inherit."""

    cluster_name: str = ""
    uuid: str = ""
    master_node: str = ""
    master_ip: str = ""
    master_netdev: str = ""
    master_netmask: int = 32
    primary_ip_family: int = 2
    mac_prefix: str = constants.DEFAULT_MAC_PREFIX
    volume_group_name: str | None = None
    file_storage_dir: str = ""
    shared_file_storage_dir: str = ""
    gluster_storage_dir: str = ""
    enabled_hypervisors: list[str] = field(default_factory=lambda: [constants.HT_FAKE])
    enabled_disk_templates: list[str] = field(
        default_factory=lambda: [constants.DT_PLAIN, constants.DT_FILE, constants.DT_DISKLESS])
    hvparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    os_hvp: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    beparams: dict[str, dict[str, Any]] = field(default_factory=lambda: {PP_DEFAULT: {}})
    nicparams: dict[str, dict[str, Any]] = field(default_factory=lambda: {PP_DEFAULT: {}})
    ndparams: dict[str, Any] = field(default_factory=dict)
    diskparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    osparams: dict[str, dict[str, str]] = field(default_factory=dict)
    osparams_private_cluster: dict[str, dict[str, str]] = field(default_factory=dict)
    ipolicy: dict[str, Any] = field(default_factory=default_ipolicy)
    candidate_pool_size: int = constants.DEFAULT_CANDIDATE_POOL_SIZE
    candidate_certs: dict[str, str] = field(default_factory=dict)
    default_iallocator: str = ""
    default_iallocator_params: dict[str, Any] = field(default_factory=dict)
    maintain_node_health: bool = False
    uid_pool: list[list[int]] = field(default_factory=list)
    enabled_user_shutdown: bool = False
    modify_etc_hosts: bool = False
    modify_ssh_setup: bool = False
    prealloc_wipe_disks: bool = False
    use_external_mip_script: bool = False
    #: raised by every master failover; nodes refuse changes carrying an older
    #: one (doc/design/failover.md, "Fencing")
    master_epoch: int = 0
    #: master candidates promote one of themselves when the master is gone
    #: (doc/ha.md, "Master autopromotion"); off by default
    auto_promote: bool = False
    #: the master declares a silent node dead (confirmed by the master
    #: candidates), fences it and restarts its HA instances elsewhere
    #: (doc/ha.md, "Node loss recovery"); off by default
    ha_recovery: bool = False
    #: seconds without an answer from a node's daemon before the master asks the
    #: candidates whether they reach it
    ha_node_timeout: int = 20
    #: recovery jobs submitted again for one instance after a failed one
    ha_max_restart: int = 1
    #: automatic relocations of one instance while one master daemon runs
    ha_max_relocate: int = 1
    tcpudp_port_pool: list[int] = field(default_factory=list)
    highest_used_port: int = 11000
    blacklisted_os: list[str] = field(default_factory=list)
    hidden_os: list[str] = field(default_factory=list)
    reserved_lvs: list[str] = field(default_factory=list)
    max_running_jobs: int = 20
    max_tracked_jobs: int = 25
    #: the usermode helper DRBD must use on the nodes (Ganeti's; verify checks it)
    drbd_usermode_helper: str | None = None
    compression_tools: list[str] = field(default_factory=lambda: ["gzip", "gzip-fast", "gzip-slow"])
    install_image: str = ""
    zeroing_image: str = ""
    instance_communication_network: str = ""
    data_collectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    rsahostkeypub: str = ""
    dsahostkeypub: str = ""
    ssh_key_type: str = "rsa"
    ssh_key_bits: int = 2048
    #: public keys an SSH key renewal retired but may not have removed from every
    #: node yet; the next renewal removes them too (doc/design/ssh.md)
    ssh_retired_keys: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0

    @property
    def primary_hypervisor(self) -> str:
        """The default hypervisor: the first enabled one."""
        return self.enabled_hypervisors[0] if self.enabled_hypervisors else constants.HT_FAKE


@dataclass
class ConfigData:
    """The root of ``config.data``."""

    version: int = constants.CONFIG_VERSION
    cluster: Cluster = field(default_factory=Cluster)
    nodes: dict[str, Node] = field(default_factory=dict)
    nodegroups: dict[str, NodeGroup] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    disks: dict[str, Disk] = field(default_factory=dict)
    networks: dict[str, Network] = field(default_factory=dict)
    filters: dict[str, dict[str, Any]] = field(default_factory=dict)
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
