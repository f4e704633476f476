"""gnt-cluster init: the master IP settings stored in the initial configuration."""

from __future__ import annotations

import pytest

from ganeti import bootstrap, config, errors
from ganeti.pathutils import Paths


def test_init_stores_master_ip_settings(tmp_path) -> None:
    paths = Paths(root=str(tmp_path / "n1"))
    bootstrap.init_cluster(paths, "clu.example", master_name="node1.example",
                           master_ip="192.0.2.1", cluster_ip="192.0.2.100",
                           master_netdev="eth0", master_netmask=24,
                           use_external_mip_script=True)
    cluster = config.ConfigWriter(paths.config_file).get_cluster_info()
    assert (cluster.master_ip, cluster.master_netdev, cluster.master_netmask,
            cluster.use_external_mip_script) == ("192.0.2.100", "eth0", 24, True)


def test_init_defaults_to_a_host_netmask(tmp_path) -> None:
    paths = Paths(root=str(tmp_path / "n1"))
    bootstrap.init_cluster(paths, "clu.example", master_name="node1.example",
                           master_ip="192.0.2.1")
    cluster = config.ConfigWriter(paths.config_file).get_cluster_info()
    assert cluster.master_netmask == 32 and not cluster.use_external_mip_script


def test_init_refuses_a_bad_netmask(tmp_path) -> None:
    paths = Paths(root=str(tmp_path / "n1"))
    with pytest.raises(errors.OpPrereqError, match="netmask"):
        bootstrap.init_cluster(paths, "clu.example", master_name="node1.example",
                               master_ip="192.0.2.1", master_netmask=33)
