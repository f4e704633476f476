"""QueryClusterInfo carries every key Ganeti 3.0's ``gnt-cluster info`` reads (doc/compat.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import make_config  # noqa: E402

from ganeti.cmdlib.cluster import cluster_info  # noqa: E402

#: the keys upstream's ShowClusterConfig indexes (read from Ganeti 3.0.2's client)
UPSTREAM_KEYS = frozenset("""
architecture beparams blacklisted_os candidate_pool_size compression_tools config_version
ctime default_hypervisor default_iallocator default_iallocator_params diskparams
drbd_usermode_helper enabled_disk_templates enabled_hypervisors enabled_user_shutdown
export_version file_storage_dir gluster_storage_dir hidden_os hvparams install_image
instance_communication_network ipolicy mac_prefix maintain_node_health master master_netdev
master_netmask max_running_jobs max_tracked_jobs modify_ssh_setup mtime name ndparams
nicparams os_api_version os_hvp osparams prealloc_wipe_disks primary_ip_version
protocol_version reserved_lvs shared_file_storage_dir software_version ssh_key_bits
ssh_key_type tags uid_pool use_external_mip_script uuid vcs_version volume_group_name
zeroing_image enabled_data_collectors data_collector_interval
""".split())


def test_every_upstream_key_is_answered(tmp_path) -> None:
    info = cluster_info(make_config(tmp_path))
    assert sorted(UPSTREAM_KEYS - set(info)) == []
    assert info["mac_prefix"] == "aa:00:00"
    assert info["enabled_data_collectors"] == {} and info["data_collector_interval"] == {}


def test_data_collectors_in_upstreams_two_dicts(tmp_path) -> None:
    cfg = make_config(tmp_path)
    cfg.get_cluster_info().data_collectors = {"lv": {"active": False, "interval": 60_000_000}}
    info = cluster_info(cfg)
    assert info["enabled_data_collectors"] == {"lv": False}
    assert info["data_collector_interval"] == {"lv": 60_000_000}
