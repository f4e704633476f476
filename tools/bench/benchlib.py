"""Helpers the benchmarks share (not a benchmark itself: ``make bench`` runs ``bench_*.py``)."""

from __future__ import annotations

import uuid as uuidlib

from ganeti import bootstrap, constants
from ganeti.config import ConfigWriter
from ganeti.objects import NIC, Instance
from ganeti.tools import vcluster

__all__ = ["fill_config"]


def fill_config(vc: vcluster.VCluster, total: int) -> None:
    """Stop masterd, add stopped diskless instances up to ``total`` with ConfigWriter, restart.

    The cheap offline path: no job, no OS script, spread round-robin over the nodes.
    """
    paths = vc.paths(vc.master_node.name)
    bootstrap.stop_daemon(paths, constants.MASTERD, timeout=10.0)
    cfg = ConfigWriter(paths.config_file)
    nodes = [cfg.get_node_info_by_name(n.name).uuid for n in vc.nodes]
    have = len(cfg.get_instance_names())
    with cfg.batch():
        for idx in range(have, total):
            mac = f"aa:01:{idx >> 16 & 255:02x}:{idx >> 8 & 255:02x}:{idx & 255:02x}:00"
            cfg.add_instance(Instance(name=f"cfg{idx:05d}.example.com", uuid=str(uuidlib.uuid4()),
                                      primary_node=nodes[idx % len(nodes)], os="tinyos",
                                      hypervisor=constants.HT_FAKE, disk_template="diskless",
                                      nics=[NIC(mac=mac)], admin_state=constants.ADMINST_DOWN),
                             [])
    vcluster.start(vc)
