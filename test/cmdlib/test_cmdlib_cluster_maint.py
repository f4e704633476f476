"""Cluster rename and repair-disk-sizes, and the issue-34 options of cluster modify,
node add/modify and renew-crypto, against a fake config and node RPC."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import CLUSTER_NAME, node_name  # noqa: E402

from ganeti import constants, crypto, errors  # noqa: E402
from ganeti.cmdlib import cluster_maint  # noqa: E402
from ganeti.objects import Disk, Instance  # noqa: E402
from ganeti.opcodes import cluster as ocluster  # noqa: E402
from ganeti.opcodes import node as onode  # noqa: E402
from ganeti.utils import net as netutils  # noqa: E402

MIB = 1024 * 1024
N1, N2 = node_name(1), node_name(2)


def _setup(tmp_path, build=None, **kw):
    cfg = make_config(tmp_path, **kw)
    if build is not None:
        build(cfg)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


# --- rename ------------------------------------------------------------------------

@pytest.fixture
def hosts(tmp_path, monkeypatch):
    path = tmp_path / "hosts"
    path.write_text("127.0.0.254 renamed.example.com\n127.0.0.253 moved.example.com\n"
                    f"127.0.0.254 {CLUSTER_NAME}\n")
    monkeypatch.setenv(netutils.ENV_HOSTS_FILE, str(path))
    return path


def test_rename_keeps_the_address_when_the_new_name_has_it(tmp_path, hosts, monkeypatch) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    cfg.get_cluster_info().master_netdev = ""
    monkeypatch.setattr(netutils, "tcp_ping", lambda *a, **kw: pytest.fail("no ping needed"))
    result, _, _ = run_opcode(ctx, ocluster.OpClusterRename(name="Renamed.Example.COM"))
    assert result == "renamed.example.com"
    cluster = cfg.committed().get_cluster_info()
    assert (cluster.cluster_name, cluster.master_ip) == ("renamed.example.com", "127.0.0.254")


def test_rename_moves_the_master_ip(tmp_path, hosts, monkeypatch) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    monkeypatch.setattr(netutils, "tcp_ping", lambda *a, **kw: False)
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterRename(name="moved.example.com"))
    assert result == "moved.example.com"
    assert cfg.committed().get_cluster_info().master_ip == "127.0.0.253"
    down = rpc.calls_to("node_deactivate_master_ip")
    up = rpc.calls_to("node_activate_master_ip")
    assert down[0][1][0]["ip"] == "127.0.0.254" and up[0][1][0]["ip"] == "127.0.0.253"
    assert any("127.0.0.253" in m for m in msgs)


@pytest.mark.parametrize("name,ping,match", [
    ("no-such-name.invalid", False, "Cannot resolve the new cluster name"),
    ("bad name!", False, "Invalid cluster name"),
    ("moved.example.com", True, "is reachable"),
], ids=["unresolvable", "invalid", "address-in-use"])
def test_rename_refusals_change_nothing(tmp_path, hosts, monkeypatch, name, ping,
                                        match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    monkeypatch.setattr(netutils, "tcp_ping", lambda *a, **kw: ping)
    monkeypatch.setattr(netutils.socket, "getaddrinfo",
                        lambda *a, **kw: (_ for _ in ()).throw(OSError("unknown")))
    before = cfg.dump()
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, ocluster.OpClusterRename(name=name))
    assert cfg.dump() == before
    assert not rpc.calls_to("node_deactivate_master_ip")


def test_rename_to_the_same_name_and_address_is_refused(tmp_path, hosts) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError, match="Neither the name nor the IP"):
        run_opcode(ctx, ocluster.OpClusterRename(name=CLUSTER_NAME))


# --- repair-disk-sizes -----------------------------------------------------------------

def _add(cfg, name: str, node: int, sizes: list[int], template: str = constants.DT_FILE) -> None:
    disks = [Disk(dev_type=template, size=size, logical_id=["loop", f"/srv/{name}/d{i}"],
                  nodes=[f"uuid-node{node}"], iv_name=f"disk/{i}")
             for i, size in enumerate(sizes)]
    cfg.add_instance(Instance(name=name, primary_node=f"uuid-node{node}", os="tinyos",
                              disk_template=template), disks)


class RealSizes:
    """The node side of ``blockdev_getdimensions``: bytes per (node, file path)."""

    def __init__(self, sizes: dict[tuple[str, str], int]) -> None:
        self.sizes = sizes

    def __call__(self, node: str, args: list[Any]) -> list[Any]:
        (disks,) = args
        out: list[Any] = []
        for disk in disks:
            size = self.sizes.get((node, disk["logical_id"][1]))
            out.append(None if size is None else [size, None])
        return out


def _sizes(cfg, name: str) -> list[int]:
    reader = cfg.committed()
    inst = reader.get_instance_info_by_name(name)
    return [d.size for d in reader.get_instance_disks(inst.uuid)]


def _two(cfg) -> None:
    _add(cfg, "a", 1, [8, 16])
    _add(cfg, "b", 2, [32])


def test_repair_records_the_real_sizes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, _two)
    rpc.set_handler("blockdev_getdimensions", RealSizes({
        (N1, "/srv/a/d0"): 8 * MIB, (N1, "/srv/a/d1"): 20 * MIB + 5,
        (N2, "/srv/b/d0"): 32 * MIB}))
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterRepairDiskSizes())
    assert result == [["a", 1, "size", 20]]
    assert _sizes(cfg, "a") == [8, 20] and _sizes(cfg, "b") == [32]
    assert any("Disk 1 of instance a has mismatched size" in m for m in msgs)


def test_repair_only_the_given_instances_and_warns_for_missing_disks(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, _two)
    rpc.set_handler("blockdev_getdimensions", RealSizes({(N1, "/srv/a/d0"): 4 * MIB,
                                                         (N2, "/srv/b/d0"): 1 * MIB}))
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterRepairDiskSizes(instances=["a"]))
    assert result == [["a", 0, "size", 4]]
    assert _sizes(cfg, "a") == [4, 16] and _sizes(cfg, "b") == [32]
    assert any("Disk 1 of instance a did not return size information" in m for m in msgs)
    assert rpc.nodes_called("blockdev_getdimensions") == {N1}


def test_repair_of_an_unknown_instance_is_refused(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError, match="nosuch"):
        run_opcode(ctx, ocluster.OpClusterRepairDiskSizes(instances=["nosuch"]))


@pytest.mark.parametrize("answer,expected", [
    ([[8 * MIB, None], [9 * MIB, 1]], [None, 9]),
    ([None, [8 * MIB, None]], ["did not return size information (missing?)", None]),
    ([["x", None], [True, None]], ["did not return valid size information (['x', None])",
                                   "did not return valid size information ([True, None])"]),
    ("garbage", ["invalid answer 'garbage'"] * 2),
], ids=["mismatch", "missing", "invalid-size", "invalid-answer"])
def test_size_mismatches(answer, expected) -> None:
    disks = [Disk(size=8), Disk(size=8)]
    assert cluster_maint.size_mismatches(disks, answer) == expected


# --- cluster modify: install image, instance communication network, tracked jobs ------

def test_set_params_stores_image_network_and_tracked_jobs(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ocluster.OpClusterSetParams(
        install_image="http://images.example.com/install.img",
        instance_communication_network="gnt.com", max_tracked_jobs=40))
    cluster = cfg.committed().get_cluster_info()
    assert cluster.install_image == "http://images.example.com/install.img"
    assert cluster.instance_communication_network == "gnt.com"
    assert cluster.max_tracked_jobs == 40
    run_opcode(ctx, ocluster.OpClusterSetParams(install_image="/srv/images/i.img",
                                                instance_communication_network=""))
    cluster = cfg.committed().get_cluster_info()
    assert (cluster.install_image, cluster.instance_communication_network) == (
        "/srv/images/i.img", "")


@pytest.mark.parametrize("kwargs,match", [
    ({"install_image": "relative/image"}, "absolute path or a URL"),
    ({"install_image": "file:///x"}, "absolute path or a URL"),
    ({"instance_communication_network": "bad name"}, "communication network"),
    ({"max_tracked_jobs": 0}, "max_tracked_jobs"),
], ids=["relative", "scheme", "network", "tracked"])
def test_set_params_refuses_bad_image_network_tracked(tmp_path, kwargs, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    before = cfg.dump()
    with pytest.raises(errors.ParameterError, match=match):
        run_opcode(ctx, ocluster.OpClusterSetParams(**kwargs))
    assert cfg.dump() == before


# --- node secondary IP ---------------------------------------------------------------

def test_node_modify_secondary_ip(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    result, _, _ = run_opcode(ctx, onode.OpNodeSetParams(node_name=N2,
                                                         secondary_ip="192.0.2.2"))
    assert ["secondary_ip", "192.0.2.2"] in result
    assert cfg.committed().get_node_info("uuid-node2").secondary_ip == "192.0.2.2"


@pytest.mark.parametrize("sip,match", [
    ("127.0.1.3", "already used by node node3"),
    ("2001:db8::2", "valid IPv4 address"),
    ("300.1.1.1", "Invalid secondary IP"),
], ids=["taken", "ipv6", "invalid"])
def test_node_modify_secondary_ip_refusals(tmp_path, sip, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    before = cfg.dump()
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=N2, secondary_ip=sip))
    assert cfg.dump() == before


def test_node_add_refuses_a_taken_secondary_ip(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError, match="already used by node node2"):
        run_opcode(ctx, onode.OpNodeAdd(node_name="node9.vcluster", primary_ip="127.0.1.9",
                                        secondary_ip="127.0.1.2"))
    assert cfg.committed().get_node_info_by_name("node9.vcluster") is None


# --- renew-crypto ------------------------------------------------------------------------

def test_renew_crypto_new_confd_hmac_key(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    path = ctx.paths.confd_hmac_key
    with open(path, "w") as fh:
        fh.write("old\n")
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterRenewCrypto(
        new_cluster_certificate=False, new_confd_hmac_key=True))
    assert result is None
    with open(path) as fh:
        key = fh.read().strip()
    assert key != "old" and len(key) == 64
    assert oct(os.stat(path).st_mode & 0o777) == "0o400"
    assert rpc.nodes_called("upload_file") == {N2}
    assert any("Confd HMAC key" in m for m in msgs)


def test_renew_crypto_of_ssh_keys_without_a_cluster_key_changes_nothing(tmp_path) -> None:
    # (the renewal itself: test/cmdlib/test_cmdlib_cluster_sshkeys.py)
    cfg, rpc, ctx = _setup(tmp_path)
    paths = ctx.paths
    key, cert = crypto.generate_self_signed_cert("old")
    for path in (paths.server_pem, paths.rapi_pem):
        crypto.write_pem_pair(path, key, cert)
    for path in (paths.cluster_domain_secret, paths.confd_hmac_key):
        with open(path, "w") as fh:
            fh.write("old\n")
    before = {p: open(p, "rb").read() for p in (paths.server_pem, paths.rapi_pem,
                                               paths.cluster_domain_secret, paths.confd_hmac_key)}
    with pytest.raises(errors.OpPrereqError, match="Cannot read the current cluster SSH key"):
        run_opcode(ctx, ocluster.OpClusterRenewCrypto(
            renew_ssh_keys=True, new_cluster_certificate=True, new_rapi_cert=True,
            new_cluster_domain_secret=True, new_confd_hmac_key=True))
    assert {p: open(p, "rb").read() for p in before} == before
    assert not rpc.calls_to("upload_file") and not rpc.calls_to("ssh_key_update")


# --- node volumes (OP_NODE_QUERYVOLS) ---------------------------------------------------

def test_node_volumes_lists_files_with_their_instances(tmp_path) -> None:
    from ganeti.opcodes.node_storage import OpNodeQueryvols

    def build(cfg) -> None:
        cfg.get_cluster_info().enabled_disk_templates = [constants.DT_FILE]
        _add(cfg, "a", 1, [8, 16])

    cfg, rpc, ctx = _setup(tmp_path, build)
    fdir = "/srv/ganeti/file-storage"   # canonical: below the master's root in make_config

    def answer(node: str, args: list[Any]) -> list[Any]:
        (units,) = args
        assert units == [["file", fdir]]
        if node == N1:
            return [["/srv", "a/d1", 16 * MIB], ["/srv", "a/d0", 8 * MIB + 1],
                    ["/srv", "stray", MIB]]
        return []
    rpc.set_handler("volume_list", answer)
    result, _, _ = run_opcode(ctx, OpNodeQueryvols(output_fields=[
        "node", "phys", "vg", "name", "size", "instance"]))
    assert result == [[N1, "/srv/a/d0", "/srv", "a/d0", "8", "a"],
                      [N1, "/srv/a/d1", "/srv", "a/d1", "16", "a"],
                      [N1, "/srv/stray", "/srv", "stray", "1", "-"]]
    result, _, _ = run_opcode(ctx, OpNodeQueryvols(nodes=[N2], output_fields=["name"]))
    assert result == []
    with pytest.raises(errors.OpPrereqError, match="Unknown output fields selected: pv"):
        run_opcode(ctx, OpNodeQueryvols(output_fields=["name", "pv"]))
