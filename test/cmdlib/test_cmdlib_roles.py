"""Master side of candidate demotion, the master IP and crypto renewal, with FakeRpc."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import crypto, errors  # noqa: E402
from ganeti.cmdlib import roles  # noqa: E402
from ganeti.opcodes import cluster as ocluster  # noqa: E402
from ganeti.opcodes import node as onode  # noqa: E402


def _setup(tmp_path, **kw):
    cfg = make_config(tmp_path, **kw)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def _mc(cfg) -> list[str]:
    return sorted(n.name for n in cfg.get_master_candidates())


# --- demotion ------------------------------------------------------------------------

def test_modify_candidate_no_demotes_on_the_node(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, pool_size=2, candidates=3)
    run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3), master_candidate=False))
    assert node_name(3) not in _mc(cfg)
    assert rpc.calls_to("node_demote_from_mc") == [([node_name(3)], [])]


def test_drain_with_auto_promote_demotes_and_promotes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=4, pool_size=3, candidates=3)
    run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(2), drained=True,
                                          auto_promote=True))
    assert _mc(cfg) == [node_name(1), node_name(3), node_name(4)]
    assert rpc.nodes_called("node_demote_from_mc") == {node_name(2)}


def test_offline_node_is_not_asked_to_demote(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, pool_size=2, candidates=3)
    run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3), offline=True))
    assert node_name(3) not in _mc(cfg)
    assert rpc.calls_to("node_demote_from_mc") == []


def test_demotion_failure_is_only_a_warning(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, pool_size=2, candidates=3)
    rpc.set_failure("node_demote_from_mc", node_name(3), "disk on fire")
    _, feedback, _ = run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3),
                                                           master_candidate=False))
    assert node_name(3) not in _mc(cfg)
    assert any("disk on fire" in m for m in feedback)


def test_promotion_pushes_config_again(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, candidates=2)
    run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3), master_candidate=True))
    uploads = [(nodes, args[0]) for nodes, args in rpc.calls_to("upload_file")]
    assert ([node_name(3)], "/var/lib/ganeti/config.data") in uploads


def test_pool_shrink_demotes_surplus_in_reverse_name_order(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=4)
    run_opcode(ctx, ocluster.OpClusterSetParams(candidate_pool_size=2))
    assert _mc(cfg) == [node_name(1), node_name(2)]
    (nodes, _), = rpc.calls_to("node_demote_from_mc")
    assert nodes == [node_name(3), node_name(4)]


def test_pool_shrink_never_demotes_the_master(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    assert roles.shrink_candidate_pool(cfg) == []
    cfg.get_cluster_info().candidate_pool_size = 1
    assert roles.shrink_candidate_pool(cfg) == [node_name(2)]
    assert _mc(cfg) == [node_name(1)]


# --- master IP -----------------------------------------------------------------------

def test_master_ip_params_from_config(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    assert roles.master_ip_params(cfg) == {"uuid": "uuid-node1", "name": node_name(1),
                                           "ip": "127.0.0.254", "netmask": 32,
                                           "netdev": "lo", "ip_family": 2}


def test_activate_and_deactivate_opcodes_call_the_master(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ocluster.OpClusterActivateMasterIp())
    run_opcode(ctx, ocluster.OpClusterDeactivateMasterIp())
    params = roles.master_ip_params(cfg)
    assert rpc.calls_to("node_activate_master_ip") == [([node_name(1)], [params, False])]
    assert rpc.calls_to("node_deactivate_master_ip") == [([node_name(1)], [params, False])]


def test_activation_failure_is_a_job_error_with_the_output(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_failure("node_activate_master_ip", node_name(1), "script said: boom")
    with pytest.raises(errors.OpExecError, match="script said: boom"):
        run_opcode(ctx, ocluster.OpClusterActivateMasterIp())


def test_empty_netdev_makes_no_rpc(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    cluster = cfg.get_cluster_info()
    cluster.master_netdev = ""
    cfg.update(cluster)
    _, feedback, _ = run_opcode(ctx, ocluster.OpClusterActivateMasterIp())
    assert rpc.calls_to("node_activate_master_ip") == []
    assert any("nothing to activate" in m for m in feedback)


def test_hooks_env_of_master_ip_lus(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    env = roles.master_ip_hooks_env(roles.master_ip_params(cfg))
    assert env == {"MASTER_NETDEV": "lo", "MASTER_IP": "127.0.0.254", "MASTER_NETMASK": "32",
                   "CLUSTER_IP_VERSION": "4"}
    assert roles.LUClusterActivateMasterIp.HPATH == "master-ip-turnup"
    assert roles.LUClusterDeactivateMasterIp.HPATH == "master-ip-turndown"


def test_modify_netdev_moves_the_master_ip(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    order = []
    rpc.set_handler("node_deactivate_master_ip", lambda n, a: order.append(("stop", a)))
    rpc.set_handler("node_activate_master_ip", lambda n, a: order.append(("start", a)))
    run_opcode(ctx, ocluster.OpClusterSetParams(master_netdev="eth1",
                                                use_external_mip_script=True))
    assert [(kind, args[0]["netdev"], args[1]) for kind, args in order] == [
        ("stop", "lo", False), ("start", "eth1", True)]
    cluster = cfg.get_cluster_info()
    assert cluster.master_netdev == "eth1" and cluster.use_external_mip_script


def test_modify_netdev_refused_when_deactivation_fails_without_force(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_failure("node_deactivate_master_ip", node_name(1), "cannot stop")
    with pytest.raises(errors.OpExecError, match="cannot stop"):
        run_opcode(ctx, ocluster.OpClusterSetParams(master_netdev="eth1"))
    assert cfg.get_cluster_info().master_netdev == "lo"
    run_opcode(ctx, ocluster.OpClusterSetParams(master_netdev="eth1", force=True))
    assert cfg.get_cluster_info().master_netdev == "eth1"


def test_modify_other_parameters_leaves_the_master_ip_alone(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ocluster.OpClusterSetParams(use_external_mip_script=True,
                                                master_netdev="lo"))
    assert rpc.calls_to("node_activate_master_ip") == []
    with pytest.raises(errors.ParameterError, match="network device"):
        run_opcode(ctx, ocluster.OpClusterSetParams(master_netdev="eth0;reboot"))


def test_destroy_deactivates_the_master_ip(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=1)
    run_opcode(ctx, ocluster.OpClusterDestroy())
    assert rpc.nodes_called("node_deactivate_master_ip") == {node_name(1)}


# --- renew crypto ----------------------------------------------------------------------

def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def test_renew_rapi_cert_and_domain_secret_only(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, offline=(3,))
    paths = ctx.paths
    key, cert = crypto.generate_self_signed_cert("old")
    crypto.write_pem_pair(paths.server_pem, key, cert)
    server_before = _read(paths.server_pem)
    result, _, _ = run_opcode(ctx, ocluster.OpClusterRenewCrypto(
        new_cluster_certificate=False, new_rapi_cert=True, new_cluster_domain_secret=True))
    assert result is None
    assert _read(paths.server_pem) == server_before
    uploads = {args[0]: (nodes, args[1]) for nodes, args in rpc.calls_to("upload_file")}
    assert set(uploads) == {"/var/lib/ganeti/rapi.pem", "/var/lib/ganeti/cluster-domain-secret"}
    assert uploads["/var/lib/ganeti/rapi.pem"] == ([node_name(2)],
                                                   _read(paths.rapi_pem).decode())
    secret = _read(paths.cluster_domain_secret).decode()
    assert len(secret.strip()) == 64
    assert uploads["/var/lib/ganeti/cluster-domain-secret"][1] == secret


def test_renew_with_given_files(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    key, cert = crypto.generate_self_signed_cert("rapi.example.com")
    pem = (key + cert).decode()
    run_opcode(ctx, ocluster.OpClusterRenewCrypto(new_cluster_certificate=False,
                                                  rapi_cert_pem=pem,
                                                  cluster_domain_secret="s3cret\n"))
    assert crypto.load_cert(ctx.paths.rapi_pem) == cert
    assert _read(ctx.paths.cluster_domain_secret) == b"s3cret\n"
    assert os.stat(ctx.paths.cluster_domain_secret).st_mode & 0o777 == 0o400


@pytest.mark.parametrize("kwargs,match", [
    ({"new_rapi_cert": True, "rapi_cert_pem": "x"}, "Only one"),
    ({"new_cluster_domain_secret": True, "cluster_domain_secret": "x"}, "Only one"),
    ({"rapi_cert_pem": "no pem here"}, "private key"),
    ({"cluster_domain_secret": "  \n"}, "empty"),
    ({}, "Nothing to renew"),
])
def test_renew_argument_errors(tmp_path, kwargs, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, ocluster.OpClusterRenewCrypto(new_cluster_certificate=False, **kwargs))
    assert rpc.calls_to("upload_file") == []
