"""Cluster verify: job submission, config checks and group checks with planted problems."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, crypto, errors, ssconf  # noqa: E402
from ganeti.cmdlib.hooksrunner import HooksRunner  # noqa: E402
from ganeti.opcodes import cluster as ocluster  # noqa: E402
from ganeti.rpc.defs import from_canonical  # noqa: E402


def _sha1(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha1(fh.read()).hexdigest()
    except OSError:
        return None


def _setup(tmp_path, **kw):
    cfg = make_config(tmp_path, **kw)
    rpc = FakeRpc(cfg)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    key, cert = crypto.generate_self_signed_cert("cluster.example.com")
    crypto.write_pem_pair(ctx.paths.server_pem, key, cert)
    ssconf.write_ssconf_files(ctx.paths, ssconf.compute_ssconf_values(cfg.get_config_data()))
    tampered: dict[tuple[str, str], str] = {}
    answers: dict[str, dict] = {}

    def node_verify(node, args):
        checks, cluster_name = args
        files = {name: tampered.get((node, name), _sha1(from_canonical(ctx.paths.root, name)))
                 for name in checks["filelist"]}
        data = {"version": [constants.PROTOCOL_VERSION, constants.RELEASE_VERSION],
                "filelist": files, "nodelist": {}, "hooks": True, "time": __import__("time").time(),
                "hostname": node, "cluster_name": cluster_name}
        data.update(answers.get(node, {}))
        return data

    rpc.set_handler("node_verify", node_verify)
    return cfg, rpc, ctx, tampered, answers


def _verify_group(ctx, **kw):
    return run_opcode(ctx, ocluster.OpClusterVerifyGroup(group_name="default", **kw))


def test_verify_submits_config_and_group_jobs(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    result, _, jobs = run_opcode(ctx, ocluster.OpClusterVerify(error_codes=True))
    assert result == {"jobs": [[True, 100], [True, 101]]}
    assert [j[0]["OP_ID"] for j in jobs] == ["OP_CLUSTER_VERIFY_CONFIG", "OP_CLUSTER_VERIFY_GROUP"]
    assert jobs[1][0]["group_name"] == "default" and jobs[1][0]["error_codes"] is True


def test_clean_cluster_verifies_true(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path, nodes=3, offline=(3,), candidates=2)
    result, msgs, _ = _verify_group(ctx)
    assert result is True, msgs
    assert not [m for m in msgs if "ERROR" in m]
    assert node_name(3) not in rpc.nodes_called("node_verify")
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyConfig())
    assert result is True, msgs


@pytest.mark.parametrize("error_codes,expected", [
    (True, "ERROR:ECLUSTERFILECHECK:cluster::File /var/lib/ganeti/config.data differs from"
           " the master's copy on node(s) node2.example.com"),
    (False, "ERROR: cluster: File /var/lib/ganeti/config.data differs from the master's copy"
            " on node(s) node2.example.com"),
], ids=["error-codes", "plain"])
def test_tampered_config_file_is_reported(tmp_path, error_codes, expected) -> None:
    cfg, rpc, ctx, tampered, _ = _setup(tmp_path)
    tampered[(node_name(2), "/var/lib/ganeti/config.data")] = "0" * 40
    result, msgs, _ = _verify_group(ctx, error_codes=error_codes)
    assert result is False
    assert f"  - {expected}" in msgs


def test_node_problems_reported_per_node(tmp_path) -> None:
    cfg, rpc, ctx, tampered, answers = _setup(tmp_path, nodes=4)
    rpc.set_failure("node_verify", node_name(2), "Error contacting node: connection refused")
    answers[node_name(3)] = {"version": [1, "0.1"], "time": 0.0}
    tampered[(node_name(4), "/var/lib/ganeti/ssconf_master_node")] = None
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False
    joined = "\n".join(msgs)
    assert "ERROR:ENODERPC:node:node2.example.com:while contacting node" in joined
    assert "ERROR:ENODEVERSION:node:node3.example.com:incompatible protocol versions" in joined
    assert "WARNING:ENODEVERSION:node:node3.example.com:software version mismatch" in joined
    assert "ERROR:ENODETIME:node:node3.example.com:Node time diverges" in joined
    assert ("ERROR:ECLUSTERFILECHECK:cluster::File /var/lib/ganeti/ssconf_master_node is"
            " missing from node(s) node4.example.com") in joined


def test_ignore_errors_downgrades_to_warning(tmp_path) -> None:
    cfg, rpc, ctx, _, answers = _setup(tmp_path)
    answers[node_name(2)] = {"time": 0.0}
    result, msgs, _ = _verify_group(ctx, error_codes=True, ignore_errors=["ENODETIME"])
    assert result is True
    assert any(m.startswith("  - WARNING:ENODETIME:node:node2.example.com") for m in msgs)


def test_config_problems_and_simulated_errors(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    node = cfg.get_node_info_by_name(node_name(1))
    node.master_candidate = False
    cfg.update(node)
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyConfig())
    assert result is False
    assert "  - ERROR: cluster: The master node node1.example.com is not a master candidate" in msgs
    result, msgs, _ = _verify_group(ctx, debug_simulate_errors=True)
    assert result is False and sum("ERROR" in m for m in msgs) > 3


def test_verify_hook_failures_are_folded_in(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    ctx.hooks_runner = HooksRunner(cfg, rpc)
    rpc.set_handler("hooks_runner", lambda node, args: (
        [["50-check", constants.HKR_FAIL, "disk full"]] if node == node_name(2) else []))
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False
    assert "  - ERROR:ENODEHOOKS:node:node2.example.com:Script 50-check failed, output:" \
           " disk full" in msgs
    assert {a[0] for _, a in rpc.calls_to("hooks_runner")} == {"cluster-verify"}


def test_missing_certificate_is_a_config_error(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    os.unlink(ctx.paths.server_pem)
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyConfig(error_codes=True))
    assert result is False
    assert any(m.startswith("  - ERROR:ECLUSTERCERT:cluster::") for m in msgs)


def test_unknown_group_is_noent(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError) as info:
        run_opcode(ctx, ocluster.OpClusterVerify(group_name="nosuch"))
    assert info.value.ecode == errors.ECODE_NOENT


def test_oob_path_problems_fail_verify(tmp_path) -> None:
    cfg, rpc, ctx, _, answers = _setup(tmp_path, nodes=2)
    cluster = cfg.get_cluster_info()
    cluster.ndparams["oob_program"] = "/opt/oob"
    cfg.update(cluster)
    seen: list = []

    def node_verify(node, args):
        seen.append(args[0].get("oob_paths"))
        return {"version": [constants.PROTOCOL_VERSION, constants.RELEASE_VERSION],
                "filelist": {}, "nodelist": {}, "time": __import__("time").time(),
                "hostname": node, "cluster_name": args[1],
                "oob_paths": ["out of band path '/opt/oob' is not executable"]}
    rpc.set_handler("node_verify", node_verify)
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False and seen[0] == ["/opt/oob"]
    assert any(m.startswith("  - ERROR:ENODEOOBPATH:node:node1.example.com:out of band path")
               for m in msgs)


@pytest.mark.parametrize("path,bad", [
    ("/boot/", True), ("/boot", True), ("/etc/ganeti/x", True), ("/usr/local/lib/x", True),
    ("relative", True), ("/srv/ganeti/file-storage", False), ("/bootx", False),
    ("/usr/share/x", False)])
def test_file_storage_path_problem(path, bad) -> None:
    from ganeti.cmdlib import verify
    assert bool(verify.file_storage_path_problem(path)) is bad


def test_forbidden_file_storage_dir_fails_config_verify(tmp_path) -> None:
    cfg, rpc, ctx, _, _ = _setup(tmp_path)
    cluster = cfg.get_cluster_info()
    cluster.file_storage_dir = "/boot/"
    if constants.DT_FILE not in cluster.enabled_disk_templates:
        cluster.enabled_disk_templates.append(constants.DT_FILE)
    cfg.update(cluster)
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyConfig(error_codes=True))
    assert result is False
    assert any("ENODEFILESTORAGEPATHUNUSABLE" in m and "/boot/" in m for m in msgs), msgs
    cluster.enabled_disk_templates.remove(constants.DT_FILE)   # not enabled: not checked
    cfg.update(cluster)
    result, msgs, _ = run_opcode(ctx, ocluster.OpClusterVerifyConfig(error_codes=True))
    assert not any("FILESTORAGEPATH" in m for m in msgs), msgs


def test_kvm_firmware_is_checked_only_when_used(tmp_path) -> None:
    cfg, rpc, ctx, _, answers = _setup(tmp_path, nodes=2)
    seen: list = []

    def node_verify(node, args):
        seen.append(args[0].get("kvm_firmware"))
        return {"version": [constants.PROTOCOL_VERSION, constants.RELEASE_VERSION],
                "filelist": {}, "nodelist": {}, "time": __import__("time").time(),
                "hostname": node, "cluster_name": args[1],
                "kvm_firmware": ["tpm=tpm2 is used but swtpm is not installed"]
                if node == node_name(2) else []}
    rpc.set_handler("node_verify", node_verify)
    cluster = cfg.get_cluster_info()
    cluster.enabled_hypervisors = [constants.HT_FAKE, constants.HT_KVM]
    cfg.update(cluster)
    _verify_group(ctx, error_codes=True)
    assert seen == [None, None]            # kvm enabled, nothing uses UEFI or a TPM
    cluster.hvparams.setdefault(constants.HT_KVM, {})["tpm"] = "tpm2"
    cfg.update(cluster)
    seen.clear()
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert seen == [["tpm2"], ["tpm2"]] and result is False
    assert [m for m in msgs if "ENODEHV" in m] == [
        f"  - ERROR:ENODEHV:node:{node_name(2)}:tpm=tpm2 is used but swtpm is not installed"]


def test_orphaned_kvm_firmware_states_are_warnings(tmp_path) -> None:
    from ganeti.objects import Instance
    cfg, rpc, ctx, _, answers = _setup(tmp_path, nodes=3)
    cfg.add_instance(Instance(name="uefi1", uuid="uuid-uefi1", primary_node="uuid-node2",
                              os="tinyos", hypervisor=constants.HT_KVM,
                              disk_template=constants.DT_DISKLESS), [])
    answers[node_name(2)] = {"kvm_firmware_states": ["uuid-uefi1"]}
    answers[node_name(3)] = {"kvm_firmware_states": ["uuid-uefi1", "uuid-gone"]}
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert not [m for m in msgs if "ORPHANFIRMWARE" in m]   # kvm not enabled: not asked
    cluster = cfg.get_cluster_info()
    cluster.enabled_hypervisors = [constants.HT_FAKE, constants.HT_KVM]
    cfg.update(cluster)
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert [m for m in msgs if "ORPHANFIRMWARE" in m] == [
        f"  - WARNING:ENODEORPHANFIRMWARE:node:{node_name(3)}:orphan UEFI/TPM state"
        " kvm-firmware/uuid-uefi1 (instance uefi1 is not on this node)",
        f"  - WARNING:ENODEORPHANFIRMWARE:node:{node_name(3)}:orphan UEFI/TPM state"
        " kvm-firmware/uuid-gone (no such instance)"]
    assert result is True      # warnings only
