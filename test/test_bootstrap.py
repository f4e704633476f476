"""Cluster bootstrap: name resolution, init files and config, node join, CLI helpers."""

from __future__ import annotations

import os
import subprocess

import pytest

from ganeti import bootstrap, config, constants, crypto, daemonctl, errors, ssconf, ssh
from ganeti.client import gnt_cluster
from ganeti.pathutils import Paths
from tools.harness import vcluster


def test_resolve_host_prefers_hosts_file(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# comment\n127.0.1.7 node7.vcluster node7\n127.0.1.8 other\n")
    env = {bootstrap.ENV_HOSTS_FILE: str(hosts)}
    assert bootstrap.resolve_host("node7.vcluster", env=env) == "127.0.1.7"
    assert bootstrap.resolve_host("NODE7", env=env) == "127.0.1.7"
    assert bootstrap.resolve_host("localhost", env=env) == "127.0.0.1"  # falls back to DNS
    with pytest.raises(errors.ResolverError):
        bootstrap.resolve_host("no-such-host.invalid", env=env)


def test_init_cluster_creates_files_and_config(tmp_path):
    paths = Paths(root=str(tmp_path / "n1"))
    data = bootstrap.init_cluster(paths, "clu.example", master_name="node1.example",
                                  master_ip="127.0.1.1", candidate_pool_size=3,
                                  beparams={"maxmem": "256"},
                                  ndparams={"ssh_port": "2222"}, clock=lambda: 1000.0)
    for path in (paths.server_pem, paths.client_pem, paths.rapi_pem, paths.confd_hmac_key,
                 paths.cluster_domain_secret, paths.ssh_key_file, paths.config_file):
        assert os.path.exists(path), path
    assert crypto.load_cert(paths.server_pem) != crypto.load_cert(paths.rapi_pem)
    cfg = config.ConfigWriter(paths.config_file)
    assert cfg.verify_config() == []
    assert data.cluster.cluster_name == "clu.example"
    cluster = cfg.get_cluster_info()
    assert cluster.cluster_name == "clu.example"
    assert cluster.candidate_pool_size == 3
    assert cluster.enabled_hypervisors == [constants.HT_FAKE]
    assert cluster.enabled_disk_templates == list(bootstrap.DEFAULT_DISK_TEMPLATES)
    assert cluster.beparams["default"]["maxmem"] == 256
    assert cluster.ndparams["ssh_port"] == 2222
    # the node-local file storage dir is stored without the master's root, so
    # that every node of a virtual cluster maps it below its own root
    assert cluster.file_storage_dir == "/srv/ganeti/file-storage"
    master = cfg.get_node_info_by_name("node1.example")
    assert master.master_candidate and master.primary_ip == "127.0.1.1"
    assert cluster.master_node == master.uuid
    store = ssconf.SimpleStore(paths)
    assert store.get_master_node() == "node1.example"
    assert store.get_cluster_name() == "clu.example"
    # the cluster key is authorised on the master itself
    blob = ssh.load_public_key(paths.ssh_key_file + ".pub")[1]
    assert blob in ssh.read_authorized_keys(bootstrap.authorized_keys_file(paths))
    with pytest.raises(errors.ConfigurationError):
        bootstrap.init_cluster(paths, "clu.example", master_name="node1.example",
                               master_ip="127.0.1.1")


def test_init_keeps_preseeded_ssh_key(tmp_path):
    paths = Paths(root=str(tmp_path / "n1"))
    os.makedirs(paths.data_dir)
    line = ssh.generate_cluster_key(paths.ssh_key_file)
    bootstrap.init_cluster(paths, "clu.example", master_name="n1.example",
                           master_ip="127.0.1.1")
    assert open(paths.ssh_key_file + ".pub").read().strip() == line


@pytest.mark.parametrize("kwargs", [
    {"enabled_hypervisors": ["nosuchhv"]},
    {"enabled_hypervisors": []},
    {"enabled_disk_templates": ["bogus"]},
    {"candidate_pool_size": 0},
    {"hvparams": {"kvm": {"x": "1"}}},
    {"beparams": {"nosuchparam": "1"}},
    {"drbd_helper": "bin/true"},
])
def test_init_cluster_refuses_bad_arguments(tmp_path, kwargs):
    paths = Paths(root=str(tmp_path / "n1"))
    with pytest.raises(errors.GanetiError):
        bootstrap.init_cluster(paths, "clu.example", master_name="n1.example",
                               master_ip="127.0.1.1", **kwargs)
    assert not os.path.exists(paths.config_file)


@pytest.mark.parametrize("version,ip,match", [
    (5, "127.0.1.1", "Invalid primary IP version 5"),
    (6, "127.0.1.1", "not an IPv6 address"),
    (4, "2001:db8::1", "not an IPv4 address"),
], ids=["bad-version", "v6-with-v4-ip", "v4-with-v6-ip"])
def test_init_cluster_primary_ip_version_refusals(tmp_path, version, ip, match):
    paths = Paths(root=str(tmp_path / "n1"))
    with pytest.raises(errors.OpPrereqError, match=match):
        bootstrap.init_cluster(paths, "clu.example", master_name="n1.example", master_ip=ip,
                               primary_ip_version=version)
    assert not os.path.exists(paths.config_file) and not os.path.exists(paths.server_pem)


def test_init_cluster_primary_ip_version_6(tmp_path):
    paths = Paths(root=str(tmp_path / "n1"))
    data = bootstrap.init_cluster(paths, "clu.example", master_name="n1.example",
                                  master_ip="2001:db8::1", primary_ip_version=6)
    assert data.cluster.primary_ip_family == 10 and data.cluster.master_netmask == 128
    v4 = bootstrap.init_cluster(Paths(root=str(tmp_path / "n2")), "clu.example",
                                master_name="n1.example", master_ip="127.0.1.1")
    assert v4.cluster.primary_ip_family == 2


def test_init_cluster_refuses_bad_names(tmp_path):
    paths = Paths(root=str(tmp_path / "n1"))
    with pytest.raises(errors.OpPrereqError):
        bootstrap.init_cluster(paths, "bad name!", master_name="n1", master_ip="127.0.1.1")


@pytest.mark.integration  # starts a daemon
@pytest.mark.timeout(60)
def test_prepare_node_join_starts_noded(tmp_path):
    master = Paths(root=str(tmp_path / "m"))
    bootstrap.init_cluster(master, "clu.example", master_name="m.example",
                           master_ip="127.0.1.1")
    node = Paths(root=str(tmp_path / "n2"))
    port = vcluster.pick_free_port(["127.0.1.2"])
    payload = bootstrap.join_payload(master, bind="127.0.1.2", port=port)
    try:
        bootstrap.prepare_node_join(node, payload)
        assert open(node.server_pem).read() == open(master.server_pem).read()
        assert daemonctl.daemon_pid(node, constants.NODED) is not None
        # the master's certificate is accepted by the new node daemon
        daemonctl.wait_for_noded("127.0.1.2", port, master.server_pem, timeout=5)
        blob = ssh.load_public_key(master.ssh_key_file + ".pub")[1]
        assert blob in ssh.read_authorized_keys(bootstrap.authorized_keys_file(node))
    finally:
        daemonctl.stop_daemon(node, constants.NODED)
    assert daemonctl.daemon_pid(node, constants.NODED) is None


def test_node_tool_main_usage_and_bad_input(tmp_path):
    env = {**os.environ, constants.ENV_ROOTDIR: str(tmp_path)}
    res = subprocess.run([vcluster.sys.executable, "-m", "ganeti.bootstrap", "bogus"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    res = subprocess.run([vcluster.sys.executable, "-m", "ganeti.bootstrap", "join"],
                         env=env, input="not json", capture_output=True, text=True, timeout=30)
    assert res.returncode == 1 and "Invalid JSON" in res.stderr


def test_parse_keyval_and_hvparams():
    assert gnt_cluster.parse_keyval("a=1,b=x,no_c,-d,e") == {
        "a": "1", "b": "x", "c": "False", "d": "default", "e": "True"}
    assert gnt_cluster.parse_keyval(None) is None
    assert gnt_cluster.parse_hvparams(["fake:a=1", "fake:b=2", "kvm:"]) == {
        "fake": {"a": "1", "b": "2"}, "kvm": {}}
    with pytest.raises(errors.ParameterError):
        gnt_cluster.parse_hvparams([":a=1"])


def test_command_output_format():
    assert gnt_cluster.format_command_output("n1", "hello\n", 0) == [
        "-" * 48, "node: n1", "hello", "return code = 0"]


def test_copyfile_path_mapping(tmp_path):
    paths = Paths(root=str(tmp_path))
    inside = os.path.join(str(tmp_path), "etc", "x")
    assert gnt_cluster._remote_path_expr(paths, inside) == '"${GANETI_ROOTDIR:-}"/etc/x'
    assert gnt_cluster._remote_path_expr(paths, "/opt/y z") == "'/opt/y z'"
    assert gnt_cluster._remote_path_expr(Paths(root="/"), "/etc/x") == "/etc/x"


def test_init_refuses_a_volume_group_missing_on_the_master(tmp_path):
    """--vg-name: the VG must exist here (vgs); refused before anything is written."""
    from fakes.cmdrunner import RecordingRunner
    paths = Paths(root=str(tmp_path / "n1"))
    kw = {"master_name": "n1.example", "master_ip": "127.0.1.1", "vg_name": "xenvg",
          "enabled_disk_templates": ["plain", "file"]}
    for runner, match in [
            (RecordingRunner().on("vgs", rc=5, stderr="Volume group \"xenvg\" not found"),
             "'xenvg' does not exist on the master node.*not found"),
            (RecordingRunner().on("vgs", stdout="  othervg|1020.00|500.00|1\n"),
             "'xenvg' does not exist on the master node")]:
        with pytest.raises(errors.OpPrereqError, match=match):
            bootstrap.init_cluster(paths, "clu.example", storage_runner=runner, **kw)
        assert runner.commands("vgs")[0][-1] == "xenvg"
        assert not os.path.exists(paths.root) or os.listdir(paths.root) == []
    ok = RecordingRunner().on("vgs", stdout="  xenvg|1020.00|500.00|1\n")
    data = bootstrap.init_cluster(paths, "clu.example", storage_runner=ok, **kw)
    assert data.cluster.volume_group_name == "xenvg"


def test_init_cluster_drbd_usermode_helper(tmp_path):
    """With drbd enabled the cluster gets Ganeti's default helper, /bin/true; without,
    none unless given."""
    from ganeti import constants

    def vgs(argv):
        from ganeti.utils.process import RunResult
        return RunResult(tuple(argv), 0, None, "  xenvg|1024.00|1024.00|1\n", "")
    with_drbd = bootstrap.init_cluster(
        Paths(root=str(tmp_path / "a")), "clu.example", master_name="n1.example",
        master_ip="127.0.1.1", enabled_disk_templates=["drbd", "plain"], vg_name="xenvg",
        storage_runner=vgs)
    assert with_drbd.cluster.drbd_usermode_helper == constants.DEFAULT_DRBD_HELPER
    plain = bootstrap.init_cluster(Paths(root=str(tmp_path / "b")), "clu.example",
                                   master_name="n1.example", master_ip="127.0.1.1")
    assert plain.cluster.drbd_usermode_helper is None
    given = bootstrap.init_cluster(Paths(root=str(tmp_path / "c")), "clu.example",
                                   master_name="n1.example", master_ip="127.0.1.1",
                                   drbd_helper="/usr/local/bin/drbd-helper")
    assert given.cluster.drbd_usermode_helper == "/usr/local/bin/drbd-helper"
