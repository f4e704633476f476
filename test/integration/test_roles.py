"""Candidate demotion, the master IP and crypto renewal on a real 4-node virtual cluster."""

from __future__ import annotations

import glob
import os
import time

import pytest
from vcluster_harness import VirtualCluster

from ganeti import crypto, pathutils

pytestmark = pytest.mark.timeout(240)

NODE4 = "node4.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcr"), nodes=4, use_ssh=False) as cluster:
        yield cluster


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _wait(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _config_like_master(vc, node: str) -> bool:
    master = _read(vc.paths(vc.names[0]).config_file)
    return master is not None and _read(vc.paths(node).config_file) == master


def _backups(vc, node: str) -> list[str]:
    return sorted(glob.glob(vc.paths(node).config_file + ".backup-*"))


# --- config push --------------------------------------------------------------------------

def test_candidates_hold_the_masters_exact_config_when_a_change_returns(vc):
    # the push travels compressed (zlib + base64); the candidates must end
    # with the very bytes of the master's file, as soon as the job is done
    candidates = [n for n, role in vc.roles().items() if role == "C"]
    assert len(candidates) == 3
    vc.ok("gnt-cluster", "add-tags", "push-compressed-test")
    master = _read(vc.paths(vc.names[0]).config_file)
    assert master is not None and b"push-compressed-test" in master
    for node in candidates:
        data = _read(vc.paths(node).config_file)
        assert data is not None and b"push-compressed-test" in data, node
    for node in candidates:
        assert _wait(lambda: _config_like_master(vc, node)), node
    vc.ok("gnt-cluster", "remove-tags", "push-compressed-test")


# --- demotion ---------------------------------------------------------------------------

def test_demoted_candidate_drops_config_and_gets_it_back_on_promotion(vc):
    assert vc.roles()[NODE4] == "C"
    assert _wait(lambda: _config_like_master(vc, NODE4))
    before = _read(vc.paths(NODE4).config_file)
    vc.ok("gnt-node", "modify", "-C", "no", NODE4)
    assert vc.roles()[NODE4] == "R"
    paths4 = vc.paths(NODE4)
    assert not os.path.exists(paths4.config_file)
    backups = _backups(vc, NODE4)
    assert len(backups) == 1
    # the backup holds a config the node had as a candidate
    assert _read(backups[0]) is not None and b'"cluster_name"' in _read(backups[0])
    assert before is not None
    # further changes are not replicated to the regular node
    vc.ok("gnt-cluster", "add-tags", "demotion-test")
    time.sleep(0.5)
    assert not os.path.exists(paths4.config_file)
    assert os.path.exists(vc.paths("node3.vcluster").config_file)
    # promotion pushes the current config again
    vc.ok("gnt-node", "modify", "-C", "yes", NODE4)
    assert vc.roles()[NODE4] == "C"
    assert _wait(lambda: _config_like_master(vc, NODE4))
    assert b"demotion-test" in _read(paths4.config_file)


def test_pool_shrink_demotes_and_growth_promotes(vc):
    vc.ok("gnt-cluster", "modify", "-C", "3")
    roles = vc.roles()
    assert roles[NODE4] == "R" and roles["node3.vcluster"] == "C"
    assert not os.path.exists(vc.paths(NODE4).config_file)
    assert len(_backups(vc, NODE4)) >= 1
    vc.ok("gnt-cluster", "modify", "-C", "10")
    assert vc.roles()[NODE4] == "C"
    assert _wait(lambda: _config_like_master(vc, NODE4))
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr


# --- master IP ---------------------------------------------------------------------------

def _install_script(vc, log: str, fail: bool = False) -> None:
    script = pathutils.external_master_setup_script(vc.paths(vc.names[0]))
    os.makedirs(os.path.dirname(script), exist_ok=True)
    body = ('echo "$1 $MASTER_IP $MASTER_NETDEV $MASTER_NETMASK" >> ' + log + "\n")
    if fail:
        body = 'echo "simulated failure on $MASTER_NETDEV"\nexit 4\n'
    with open(script + ".tmp", "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(script + ".tmp", 0o755)
    os.replace(script + ".tmp", script)


def _lines(log: str) -> list[str]:
    data = _read(log)
    return data.decode().splitlines() if data else []


def test_master_ip_with_external_script(vc, tmp_path):
    log = str(tmp_path / "mip.log")
    _install_script(vc, log)
    master_paths = vc.paths(vc.names[0])
    ip = _read(master_paths.ssconf_file("master_ip")).decode().strip()
    vc.ok("gnt-cluster", "modify", "--use-external-mip-script", "yes")
    assert "use external master IP address setup script: True" in vc.ok("gnt-cluster", "info")
    # no netdev yet: activation is a no-op
    vc.ok("gnt-cluster", "activate-master-ip")
    assert _lines(log) == []
    vc.ok("gnt-cluster", "modify", "--master-netdev", "gntdev0")
    assert _lines(log) == [f"start {ip} gntdev0 32"]
    assert vc.run("gnt-cluster", "deactivate-master-ip").returncode == 1   # needs --yes
    vc.ok("gnt-cluster", "deactivate-master-ip", "--yes")
    vc.ok("gnt-cluster", "activate-master-ip")
    assert _lines(log)[1:] == [f"stop {ip} gntdev0 32", f"start {ip} gntdev0 32"]
    vc.ok("gnt-cluster", "modify", "--master-netdev", "gntdev1")
    assert _lines(log)[3:] == [f"stop {ip} gntdev0 32", f"start {ip} gntdev1 32"]
    # a failing script: the job fails with the script's output
    _install_script(vc, log, fail=True)
    res = vc.run("gnt-cluster", "activate-master-ip")
    assert res.returncode != 0
    assert "simulated failure on gntdev1" in res.stdout + res.stderr
    # back to no master IP (deactivation on the old netdev runs the script)
    _install_script(vc, log)
    vc.ok("gnt-cluster", "modify", "--master-netdev", "")
    assert _lines(log)[5:] == [f"stop {ip} gntdev1 32"]
    vc.ok("gnt-cluster", "modify", "--use-external-mip-script", "no")
    assert "use external master IP address setup script: False" in vc.ok("gnt-cluster",
                                                                          "info")


# --- renew-crypto ------------------------------------------------------------------------

def _per_node(vc, attr: str) -> dict[str, bytes | None]:
    return {name: _read(getattr(vc.paths(name), attr)) for name in vc.names}


def _renew_and_check(vc, attr: str, *args: str) -> bytes:
    before = _per_node(vc, attr)
    assert len(set(before.values())) == 1 and None not in before.values()
    assert vc.run("gnt-cluster", "renew-crypto", *args).returncode == 1   # no --force
    assert _per_node(vc, attr) == before
    vc.ok("gnt-cluster", "renew-crypto", *args, "--force")
    after = _per_node(vc, attr)
    assert len(set(after.values())) == 1, "file differs between nodes"
    new = after[vc.names[0]]
    assert new is not None and new != before[vc.names[0]]
    return new


def test_renew_rapi_certificate_and_domain_secret(vc, tmp_path):
    server_before = _per_node(vc, "server_pem")
    _renew_and_check(vc, "rapi_pem", "--new-rapi-certificate")
    _renew_and_check(vc, "cluster_domain_secret", "--new-cluster-domain-secret")
    key, cert = crypto.generate_self_signed_cert("rapi.vcluster")
    pem_file = tmp_path / "rapi.pem"
    pem_file.write_bytes(key + cert)
    new = _renew_and_check(vc, "rapi_pem", "--rapi-certificate", str(pem_file))
    assert cert.strip() in new
    secret_file = tmp_path / "cds"
    secret_file.write_text("given-domain-secret\n")
    assert _renew_and_check(vc, "cluster_domain_secret", "--cluster-domain-secret",
                            str(secret_file)) == b"given-domain-secret\n"
    # the cluster certificate was left alone
    assert _per_node(vc, "server_pem") == server_before
    res = vc.run("gnt-cluster", "renew-crypto", "--new-rapi-certificate",
                 "--rapi-certificate", str(pem_file), "--force")
    assert res.returncode == 1 and "Only one" in res.stderr
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr
