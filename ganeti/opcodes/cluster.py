"""Cluster-level opcodes: query, post-init, destroy, modify, redist, verify, crypto, master IP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param
from ganeti.private import Private

__all__ = ["OpClusterQuery", "OpClusterPostInit", "OpClusterDestroy", "OpClusterSetParams",
           "OpClusterRedistConf", "OpClusterVerify", "OpClusterVerifyConfig",
           "OpClusterVerifyGroup", "OpClusterVerifyDisks", "OpClusterRenewCrypto", "OpClusterActivateMasterIp",
           "OpClusterDeactivateMasterIp", "OpClusterRename", "OpClusterRepairDiskSizes",
           "VERIFY_OPTIONAL_CHECKS",
           "ALL_OPCODES"]

#: Checks ``skip_checks`` may name (as Ganeti: nplusone memory, disk lists).
VERIFY_OPTIONAL_CHECKS = ("nplusone_mem", "nplusone", "disk", "clock")


@dataclass(kw_only=True)
class OpClusterQuery(OpCode):
    """Return the cluster information dict (same as LUXI QueryClusterInfo)."""


@dataclass(kw_only=True)
class OpClusterPostInit(OpCode):
    """Run the cluster-init post hooks (submitted right after ``gnt-cluster init``)."""


@dataclass(kw_only=True)
class OpClusterDestroy(OpCode):
    """Destroy the cluster: only possible with the master as the last node."""


@dataclass(kw_only=True)
class OpClusterSetParams(OpCode):
    """Change cluster parameters; only the given (non-null) fields change.

    Dict parameters are change sets: the value ``"default"`` removes a key.
    """

    enabled_hypervisors: list[str] | None = param(None, choices=constants.HYPER_TYPES)
    hvparams: dict[str, dict[str, Any]] | None = None
    beparams: dict[str, Any] | None = None
    nicparams: dict[str, Any] | None = None
    ndparams: dict[str, Any] | None = None
    diskparams: dict[str, dict[str, Any]] | None = None
    os_hvp: dict[str, dict[str, dict[str, Any]]] | None = None
    osparams: dict[str, dict[str, Any]] | None = None
    candidate_pool_size: int | None = param(None, min=1)
    enabled_disk_templates: list[str] | None = param(None, choices=constants.DISK_TEMPLATES)
    max_running_jobs: int | None = param(None, min=1)
    max_tracked_jobs: int | None = param(None, min=1)
    drbd_helper: str | None = param(None, doc="the usermode helper DRBD must use on the"
                                    " nodes (an absolute path; checked by verify)")
    default_iallocator: str | None = None
    default_iallocator_params: dict[str, Any] | None = None
    file_storage_dir: str | None = None
    shared_file_storage_dir: str | None = None
    vg_name: str | None = param(None, doc="the LVM volume group of plain/drbd disks;"
                                " '' removes it (refused while such templates are enabled)")
    maintain_node_health: bool | None = None
    auto_promote: bool | None = param(None, doc="whether the master candidates promote one"
                                      " of themselves when the master is gone (doc/ha.md)")
    ha_recovery: bool | None = param(None, doc="whether the master recovers the HA instances"
                                     " of a node it declares dead (doc/ha.md)")
    ha_node_timeout: int | None = param(None, min=1, doc="seconds without an answer from a"
                                        " node before the master candidates are asked")
    ha_max_restart: int | None = param(None, min=0, doc="recovery jobs submitted again for"
                                       " one instance after a failed one")
    ha_max_relocate: int | None = param(None, min=0, doc="automatic relocations of one"
                                        " instance while one master daemon runs")
    prealloc_wipe_disks: bool | None = None
    modify_etc_hosts: bool | None = None
    mac_prefix: str | None = None
    master_netdev: str | None = None
    master_netmask: int | None = param(None, min=0, max=128)
    use_external_mip_script: bool | None = None
    uid_pool: list[Any] | None = None
    add_uids: list[Any] | None = None
    remove_uids: list[Any] | None = None
    ipolicy: dict[str, Any] | None = None
    hidden_os: list[Any] | None = None
    blacklisted_os: list[Any] | None = None
    install_image: str | None = param(None, doc="absolute path or URL of the image running"
                                      " OS scripts (not used here: stored and shown); '' clears")
    instance_communication_network: str | None = param(
        None, doc="network for instance communication (created with 169.254.0.0/16 and"
        " connected routed to every node group when missing); '' clears")
    # Ganeti 3.0 parameters taken at the cluster's current value only (a no-op: /2/info's
    # answer can be PUT back to /2/modify); changing them is refused (doc/compat.md)
    zeroing_image: str | None = param(None, doc="only the current value (no change)")
    reserved_lvs: list[str] | None = param(None, doc="only the current value (no change)")
    gluster_storage_dir: str | None = param(None, doc="only the current value (no change)")
    compression_tools: list[str] | None = param(None, doc="only the current value (no change)")
    enabled_user_shutdown: bool | None = param(None, doc="only the current value (no change)")
    enabled_data_collectors: dict[str, bool] | None = param(
        None, doc="only the current values of the named collectors (no change)")
    data_collector_interval: dict[str, int] | None = param(
        None, doc="only the current values of the named collectors (no change)")
    force: bool = False


@dataclass(kw_only=True)
class OpClusterRedistConf(OpCode):
    """Push the configuration, ssconf and cluster files to all nodes."""


@dataclass(kw_only=True)
class OpClusterVerify(OpCode):
    """Submit one VERIFY_CONFIG job and one VERIFY_GROUP job per node group.

    Result: ``{"jobs": [[true, job_id], ...]}``.
    """

    group_name: str | None = None
    error_codes: bool = False
    debug_simulate_errors: bool = False
    skip_checks: list[str] = param([], choices=VERIFY_OPTIONAL_CHECKS)
    ignore_errors: list[str] = param([])
    verbose: bool = False
    verify_clutter: bool = False


@dataclass(kw_only=True)
class OpClusterVerifyConfig(OpCode):
    """Verify the configuration and the cluster-wide state; result True if clean."""

    error_codes: bool = False
    debug_simulate_errors: bool = False
    ignore_errors: list[str] = param([])
    verbose: bool = False


@dataclass(kw_only=True)
class OpClusterVerifyGroup(OpCode):
    """Verify the nodes of one group; result True if no error was found."""

    OP_DSC_FIELD = "group_name"

    group_name: str
    error_codes: bool = False
    debug_simulate_errors: bool = False
    skip_checks: list[str] = param([], choices=VERIFY_OPTIONAL_CHECKS)
    ignore_errors: list[str] = param([])
    verbose: bool = False
    verify_clutter: bool = False


@dataclass(kw_only=True)
class OpClusterVerifyDisks(OpCode):
    """Submit one OP_GROUP_VERIFY_DISKS job per node group (or for ``group_name``).

    Result: ``{"jobs": [[true, job_id], ...]}``.
    """

    group_name: str | None = None


@dataclass(kw_only=True)
class OpClusterRenewCrypto(OpCode):
    """Renew cluster crypto material and push it to every online node.

    ``new_cluster_certificate`` (the default) renews the node daemon
    certificate; the node daemons keep using the one they loaded at start
    until they are restarted (the CLI restarts them).  ``new_rapi_cert``
    generates a new RAPI certificate, ``rapi_cert_pem`` installs the given
    one (key and certificate, PEM); ``new_cluster_domain_secret`` /
    ``cluster_domain_secret`` do the same for the cluster domain secret.
    ``new_confd_hmac_key`` generates a new confd HMAC key (ours: this field
    is not Ganeti's, whose client renews the key itself); ``node_certificates``
    renews the node daemons' certificate, which here is the cluster
    certificate (one for all nodes).  ``renew_ssh_keys`` replaces the
    cluster SSH key pair on every online node (``ssh_key_type``: ed25519,
    rsa or ecdsa, default the cluster's; ``ssh_key_bits`` as upstream's).
    The result is the new cluster certificate's fingerprint, or None when it
    was not renewed.  ``rapi_cert_pem`` (it holds a private key) and
    ``cluster_domain_secret`` are private (:mod:`ganeti.private`).
    """

    new_cluster_certificate: bool = True
    new_rapi_cert: bool = False
    rapi_cert_pem: Private | None = None
    new_cluster_domain_secret: bool = False
    cluster_domain_secret: Private | None = None
    new_confd_hmac_key: bool = False
    node_certificates: bool = False
    renew_ssh_keys: bool = False
    ssh_key_type: str | None = None
    ssh_key_bits: int | None = None
    verbose: bool = False
    debug: bool = False


@dataclass(kw_only=True)
class OpClusterActivateMasterIp(OpCode):
    """Activate the master IP address on the master node (setup script ``start``)."""


@dataclass(kw_only=True)
class OpClusterDeactivateMasterIp(OpCode):
    """Deactivate the master IP address on the master node (setup script ``stop``)."""


@dataclass(kw_only=True)
class OpClusterRename(OpCode):
    """Rename the cluster; the master IP becomes the new name's address.

    Result: the new cluster name.
    """

    OP_DSC_FIELD = "name"

    name: str


@dataclass(kw_only=True)
class OpClusterRepairDiskSizes(OpCode):
    """Record the real sizes of instance disks where the configuration differs.

    ``instances``: the instances to check (default: all).  Result: a list of
    ``[instance, disk index, "size", new size in MiB]`` per repaired disk.
    """

    instances: list[str] = param([])


ALL_OPCODES = (OpClusterRename, OpClusterRepairDiskSizes, OpClusterQuery, OpClusterPostInit, OpClusterDestroy, OpClusterSetParams,
               OpClusterRedistConf, OpClusterVerify, OpClusterVerifyConfig,
               OpClusterVerifyGroup, OpClusterVerifyDisks, OpClusterRenewCrypto, OpClusterActivateMasterIp,
               OpClusterDeactivateMasterIp)
