"""Cluster LUs: set params, redist conf, destroy, post-init, renew crypto, cluster query."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import crypto, errors  # noqa: E402
from ganeti.cmdlib import query as cq  # noqa: E402
from ganeti.opcodes import cluster as ocluster  # noqa: E402
from ganeti.opcodes import registry  # noqa: E402


def _setup(tmp_path, **kw):
    cfg = make_config(tmp_path, **kw)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


@pytest.mark.parametrize("kwargs,match", [
    ({"hvparams": {"fake": {"no_such_param": 1}}}, "no_such_param"),
    ({"beparams": {"maxmem": "lots"}}, "maxmem"),
    ({"ndparams": {"bogus": 1}}, "bogus"),
    ({"mac_prefix": "zz:00"}, "MAC prefix"),
    ({"file_storage_dir": "relative/dir"}, "file_storage_dir"),
], ids=["hv", "be", "nd", "mac", "filedir"])
def test_set_params_refusal_changes_nothing(tmp_path, kwargs, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    before = cfg.dump()
    with pytest.raises(errors.ParameterError, match=match):
        run_opcode(ctx, ocluster.OpClusterSetParams(candidate_pool_size=1, **kwargs))
    assert cfg.dump() == before


def test_set_params_stores_only_what_was_set(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ocluster.OpClusterSetParams(beparams={"maxmem": "256M"},
                                                nicparams={"link": "br0"},
                                                enabled_disk_templates=["file", "diskless"]))
    cluster = cfg.get_cluster_info()
    assert cluster.beparams == {"default": {"maxmem": 256}}
    assert cluster.nicparams["default"] == {"link": "br0"}
    assert cluster.enabled_disk_templates == ["file", "diskless"]
    run_opcode(ctx, ocluster.OpClusterSetParams(beparams={"maxmem": "default"}))
    assert cluster.beparams == {"default": {}}


def test_auto_promote_is_off_until_set(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    assert cfg.get_cluster_info().auto_promote is False
    serial = cfg.get_serial_no()
    run_opcode(ctx, ocluster.OpClusterSetParams(auto_promote=True))
    assert cfg.get_cluster_info().auto_promote is True
    assert cfg.get_serial_no() > serial
    run_opcode(ctx, ocluster.OpClusterSetParams(auto_promote=False))
    assert cfg.get_cluster_info().auto_promote is False


def test_raising_pool_size_promotes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=4, pool_size=2)
    run_opcode(ctx, ocluster.OpClusterSetParams(candidate_pool_size=3))
    assert [n.name for n in cfg.get_master_candidates()] == [node_name(i) for i in (1, 2, 3)]


def test_redist_conf_pushes_to_other_nodes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, candidates=2, offline=(3,))
    serial = cfg.get_serial_no()
    run_opcode(ctx, ocluster.OpClusterRedistConf())
    assert cfg.get_serial_no() > serial
    assert rpc.nodes_called("write_ssconf_files") == {node_name(2)}
    assert rpc.nodes_called("upload_file") == {node_name(2)}


def test_destroy_refused_with_other_nodes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError, match="node"):
        run_opcode(ctx, ocluster.OpClusterDestroy())
    cfg1, rpc1, ctx1 = _setup(tmp_path / "one", nodes=1)
    assert run_opcode(ctx1, ocluster.OpClusterDestroy())[0] == node_name(1)


def test_renew_crypto_uploads_new_certificate(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    key, cert = crypto.generate_self_signed_cert("old")
    crypto.write_pem_pair(ctx.paths.server_pem, key, cert)
    result, _, _ = run_opcode(ctx, ocluster.OpClusterRenewCrypto())
    new_cert = crypto.load_cert(ctx.paths.server_pem)
    assert new_cert != cert and result == crypto.cert_fingerprint(new_cert)
    (nodes, args), = rpc.calls_to("upload_file")
    assert nodes == [node_name(2)] and args[0] == "/var/lib/ganeti/server.pem"
    assert new_cert.decode() in args[1]


def test_cluster_query_resource(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    res = cq.run_query(ctx, "cluster", ["name", "master_node", "candidate_pool_size"], None)
    assert res["data"] == [[[0, "cluster.example.com"], [0, node_name(1)], [0, 10]]]


def test_ha_recovery_is_off_until_set_and_its_limits_change(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    cluster = cfg.get_cluster_info()
    assert (cluster.ha_recovery, cluster.ha_node_timeout, cluster.ha_max_restart,
            cluster.ha_max_relocate) == (False, 20, 1, 1)
    run_opcode(ctx, ocluster.OpClusterSetParams(ha_recovery=True, ha_node_timeout=7,
                                                ha_max_restart=0, ha_max_relocate=3))
    cluster = cfg.get_cluster_info()
    assert (cluster.ha_recovery, cluster.ha_node_timeout, cluster.ha_max_restart,
            cluster.ha_max_relocate) == (True, 7, 0, 3)


def test_ha_node_timeout_below_one_second_is_refused() -> None:
    with pytest.raises(errors.OpPrereqError):
        registry.from_dict({"OP_ID": "OP_CLUSTER_SET_PARAMS", "ha_node_timeout": 0})
