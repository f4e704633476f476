"""tools.vcluster after failovers: the current master, and the partition rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ganeti.pathutils import Paths
from tools.harness import vcluster


def _vc(tmp_path: Path, n: int = 3) -> vcluster.VCluster:
    nodes = [vcluster.VNode(name=f"node{k}.vcluster", ip=f"127.0.1.{k}",
                            root=str(tmp_path / f"node{k}")) for k in range(1, n + 1)]
    for node in nodes:
        os.makedirs(Paths(root=node.root).data_dir)
    return vcluster.VCluster(directory=str(tmp_path), cluster_name="c", noded_port=1811,
                             ssh_port=2222, master="node1.vcluster", nodes=nodes,
                             rapi_port=5080)


def _ssconf(vc, node: str, master: str) -> None:
    with open(vc.paths(node).ssconf_file("master_node"), "w") as fh:
        fh.write(master + "\n")


def _epoch(vc, node: str, epoch: int, master: str) -> None:
    with open(os.path.join(vc.paths(node).data_dir, "master_epoch"), "w") as fh:
        json.dump({"epoch": epoch, "master": master}, fh)


def test_current_master_follows_the_newest_epoch(tmp_path):
    vc = _vc(tmp_path)
    assert vcluster.current_master(vc).name == "node1.vcluster"       # nothing yet
    for node in ("node1", "node2", "node3"):
        _ssconf(vc, node, "node1.vcluster")
    _ssconf(vc, "node3", "node3.vcluster")
    assert vcluster.current_master(vc).name == "node1.vcluster"       # ssconf majority
    _epoch(vc, "node1", 0, "node1.vcluster")
    _epoch(vc, "node3", 2, "node3.vcluster")                         # the newest epoch wins
    assert vcluster.current_master(vc).name == "node3.vcluster"
    assert "GANETI_HOSTNAME=node3.vcluster" in "\n".join(vcluster.env_lines(vc))


def test_nft_rules_cut_only_the_isolated_node_and_the_cluster_ports(tmp_path):
    vc = _vc(tmp_path)
    vc.isolated = ["node2.vcluster"]
    rules = vcluster.nft_ruleset(vc)
    assert rules.startswith(f"table inet {vcluster._nft_table(vc)} {{")
    drops = [line.strip() for line in rules.splitlines() if line.strip().endswith('"')]
    assert len(drops) == 4
    assert all("127.0.1.2" in line and "{ 1811, 2222, 5080 }" in line for line in drops)
    assert any(line.startswith("ip saddr 127.0.1.2 ip daddr != 127.0.1.2 tcp dport")
               for line in drops)
    assert any(line.startswith("ip daddr 127.0.1.2 ip saddr != 127.0.1.2 tcp sport")
               for line in drops)
    assert "127.0.1.1" not in rules and "127.0.1.3" not in rules


def test_nft_table_differs_per_cluster(tmp_path):
    a, b = _vc(tmp_path / "a"), _vc(tmp_path / "b")
    assert vcluster._nft_table(a) != vcluster._nft_table(b)


def test_partitions_need_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in (vcluster.partition_support() or "")


def test_node_env_binds_rpc_to_the_node_address(tmp_path):
    vc = _vc(tmp_path)
    env = vcluster.node_env(vc, vc.nodes[1])
    assert env["GANETI_SOURCE_ADDRESS"] == "127.0.1.2"


def test_start_brings_up_every_node_daemon_before_the_master_daemon(tmp_path, monkeypatch):
    # masterd asks a majority of node daemons to confirm it when it starts
    vc = _vc(tmp_path, n=5)
    vc.ssh_port = 0
    for node in vc.nodes:
        Path(Paths(root=node.root).server_pem).write_text("cert")
        os.makedirs(os.path.dirname(Paths(root=node.root).vnode_boot_id_file), exist_ok=True)
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(vcluster.daemonctl, "daemon_pid", lambda paths, name: None)
    monkeypatch.setattr(vcluster.daemonctl, "start_noded",
                        lambda paths, ip, port, env: calls.append(("noded", ip)))
    monkeypatch.setattr(vcluster.daemonctl, "start_masterd",
                        lambda paths, env, extra_args: calls.append(("masterd", paths.root)))
    monkeypatch.setattr(vcluster.daemonctl, "start_rapi",
                        lambda paths, env: calls.append(("rapi", paths.root)))
    vcluster.start(vc)
    kinds = [kind for kind, _ in calls]
    assert kinds == ["noded"] * 5 + ["masterd", "rapi"]
