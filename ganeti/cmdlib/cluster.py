"""Cluster-level logical units (more come with cluster initialisation)."""

from __future__ import annotations

import platform
from typing import Any

from ganeti import constants, serializer
from ganeti.cmdlib.base import NoHooksLU

__all__ = ["LUClusterQuery", "cluster_info"]


def cluster_info(cfg: Any) -> dict[str, Any]:
    """The QueryClusterInfo dict (also the result of OP_CLUSTER_QUERY)."""
    cluster = cfg.get_cluster_info()
    master = cfg.get_node_info(cluster.master_node) if cluster.master_node else None
    data = serializer.to_data(cluster)
    return {
        "software_version": constants.RELEASE_VERSION,
        "protocol_version": constants.PROTOCOL_VERSION,
        "config_version": constants.CONFIG_VERSION,
        "os_api_version": max(constants.OS_API_VERSIONS),
        "export_version": constants.EXPORT_VERSION,
        "vcs_version": "",
        "architecture": [platform.architecture()[0], platform.machine()],
        "name": cluster.cluster_name,
        "master": master.name if master is not None else cluster.master_node,
        "default_hypervisor": cluster.primary_hypervisor,
        "enabled_hypervisors": data["enabled_hypervisors"],
        "hvparams": data["hvparams"],
        "os_hvp": data["os_hvp"],
        "beparams": data["beparams"],
        "osparams": data["osparams"],
        "nicparams": data["nicparams"],
        "ndparams": data["ndparams"],
        "diskparams": data["diskparams"],
        "ipolicy": data["ipolicy"],
        "candidate_pool_size": cluster.candidate_pool_size,
        "master_netdev": cluster.master_netdev,
        "master_netmask": cluster.master_netmask,
        "use_external_mip_script": cluster.use_external_mip_script,
        "volume_group_name": cluster.volume_group_name,
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        "gluster_storage_dir": cluster.gluster_storage_dir,
        "maintain_node_health": cluster.maintain_node_health,
        "ctime": cluster.ctime,
        "mtime": cluster.mtime,
        "uuid": cluster.uuid,
        "tags": sorted(cluster.tags),
        "uid_pool": data["uid_pool"],
        "default_iallocator": cluster.default_iallocator,
        "default_iallocator_params": data["default_iallocator_params"],
        "reserved_lvs": data["reserved_lvs"],
        "primary_ip_version": 6 if cluster.primary_ip_family == 10 else 4,
        "prealloc_wipe_disks": cluster.prealloc_wipe_disks,
        "hidden_os": data["hidden_os"],
        "blacklisted_os": data["blacklisted_os"],
        "enabled_disk_templates": data["enabled_disk_templates"],
        "enabled_user_shutdown": cluster.enabled_user_shutdown,
        "compression_tools": data["compression_tools"],
        "max_running_jobs": cluster.max_running_jobs,
        "max_tracked_jobs": cluster.max_tracked_jobs,
        "modify_etc_hosts": cluster.modify_etc_hosts,
        "modify_ssh_setup": cluster.modify_ssh_setup,
        "ssh_key_type": cluster.ssh_key_type,
        "ssh_key_bits": cluster.ssh_key_bits,
    }


class LUClusterQuery(NoHooksLU):
    """Return the cluster information (no locks beyond a shared BGL)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: Any) -> Any:
        return cluster_info(self.cfg)
