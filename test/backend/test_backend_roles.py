"""Node side of the role procedures: node_demote_from_mc and the master IP scripts."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess

import pytest

from ganeti import errors, pathutils, ssconf
from ganeti.backend import get_function
from ganeti.backend import masterip
from ganeti.backend import node as bnode
from ganeti.rpc import defs
from ganeti.tools import master_ip_setup as mis

PARAMS = {"uuid": "u1", "name": "node1.example.com", "ip": "192.0.2.10", "netmask": 24,
          "netdev": "eth7", "ip_family": 2}


def _write_config(ctx, data: bytes = b'{"serial_no": 7}') -> None:
    with open(ctx.paths.config_file, "wb") as fh:
        fh.write(data)


def _set_master(ctx, name: str) -> None:
    ssconf.write_ssconf_files(ctx.paths, {"master_node": name})


# --- node_demote_from_mc ------------------------------------------------------------

def test_rows_are_declared_and_have_backend_functions() -> None:
    for name in ("node_demote_from_mc", "node_activate_master_ip",
                 "node_deactivate_master_ip"):
        assert name in defs.CALLS
        assert callable(get_function(name))


def test_demote_backs_up_and_removes_config(ctx) -> None:
    _set_master(ctx, "node9.example.com")
    _write_config(ctx, b"config bytes")
    result = bnode.node_demote_from_mc(ctx)
    backup = bnode.config_backup_name(ctx.paths.config_file, 1234.5)
    assert result == ctx.canonical(backup)
    assert result.startswith("/var/lib/ganeti/config.data.backup-")
    assert not os.path.exists(ctx.paths.config_file)
    with open(backup, "rb") as fh:
        assert fh.read() == b"config bytes"
    # a second demotion in the same second keeps the first backup
    _write_config(ctx, b"newer bytes")
    second = bnode.node_demote_from_mc(ctx)
    assert second == ctx.canonical(backup + ".1")
    with open(backup, "rb") as fh:
        assert fh.read() == b"config bytes"
    with open(backup + ".1", "rb") as fh:
        assert fh.read() == b"newer bytes"


def test_demote_without_config_is_a_no_op(ctx) -> None:
    _set_master(ctx, "node9.example.com")
    assert bnode.node_demote_from_mc(ctx) is None


def test_demote_refused_on_the_master(ctx) -> None:
    _set_master(ctx, ctx.hostname)
    _write_config(ctx)
    with pytest.raises(errors.OpExecError, match="master node"):
        bnode.node_demote_from_mc(ctx)
    assert os.path.exists(ctx.paths.config_file)


def test_backup_name_format() -> None:
    name = bnode.config_backup_name("/x/config.data", 0.0)
    stamp = name[len("/x/config.data.backup-"):]
    assert name.startswith("/x/config.data.backup-")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}_\d{2}_\d{2}_\d{2}", stamp)


# --- master IP: node side -----------------------------------------------------------

def _install_external(ctx, body: str) -> str:
    path = pathutils.external_master_setup_script(ctx.paths)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def test_external_script_gets_action_and_environment(ctx, tmp_path) -> None:
    log = tmp_path / "mip.log"
    _install_external(ctx, f'echo "$1 $MASTER_IP $MASTER_NETDEV $MASTER_NETMASK'
                           f' $CLUSTER_IP_VERSION" >> {log}\n')
    masterip.node_activate_master_ip(ctx, PARAMS, True)
    masterip.node_deactivate_master_ip(ctx, dict(PARAMS, netdev="eth8"), True)
    assert log.read_text().splitlines() == ["start 192.0.2.10 eth7 24 4",
                                            "stop 192.0.2.10 eth8 24 4"]


def test_failing_external_script_reports_its_output(ctx) -> None:
    _install_external(ctx, 'echo "no such device $MASTER_NETDEV" >&2\nexit 3\n')
    with pytest.raises(errors.OpExecError) as info:
        masterip.node_activate_master_ip(ctx, PARAMS, True)
    text = str(info.value)
    assert "no such device eth7" in text and "status 3" in text and "external" in text


def test_missing_external_script_is_a_clear_error(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="does not exist or is not executable"):
        masterip.node_activate_master_ip(ctx, PARAMS, True)


def test_empty_netdev_is_a_no_op(ctx) -> None:
    # neither script runs: the external one does not even exist
    assert masterip.node_activate_master_ip(ctx, dict(PARAMS, netdev=""), True) is None
    assert masterip.node_deactivate_master_ip(ctx, dict(PARAMS, netdev=""), False) is None


@pytest.mark.parametrize("change,match", [
    ({"netdev": "-evil"}, "network device"),
    ({"netdev": "eth0 up"}, "network device"),
    ({"ip": "not-an-ip"}, "IP address"),
    ({"ip": "2001:db8::1"}, "IP version"),
    ({"netmask": 33}, "netmask"),
    ({"netmask": True}, "netmask"),
])
def test_invalid_master_params_are_refused(ctx, change, match) -> None:
    with pytest.raises(errors.OpExecError, match=match):
        masterip.master_ip_env(dict(PARAMS, **change))


def test_ipv6_environment() -> None:
    env = masterip.master_ip_env(dict(PARAMS, ip="2001:db8::1", netmask=64, ip_family=10))
    assert env == {"MASTER_NETDEV": "eth7", "MASTER_IP": "2001:db8::1",
                   "MASTER_NETMASK": "64", "CLUSTER_IP_VERSION": "6"}


def test_default_script_is_shipped_and_selected(ctx) -> None:
    assert os.path.isfile(masterip.DEFAULT_SCRIPT)
    argv = masterip.setup_script_argv(ctx, "start", False)
    assert argv[1:] == [masterip.DEFAULT_SCRIPT, "start"]


# --- the default script: pure command construction -------------------------------------

def test_build_commands_start_with_and_without_arping() -> None:
    assert mis.build_commands("start", "eth0", "192.0.2.1", 32, 4, True) == [
        ["ip", "address", "add", "192.0.2.1/32", "dev", "eth0"],
        ["arping", "-U", "-c", "3", "-I", "eth0", "192.0.2.1"]]
    assert mis.build_commands("start", "eth0", "192.0.2.1", 32, 4, False) == [
        ["ip", "address", "add", "192.0.2.1/32", "dev", "eth0"]]
    # no ARP for IPv6
    assert mis.build_commands("start", "eth0", "2001:db8::1", 64, 6, True) == [
        ["ip", "address", "add", "2001:db8::1/64", "dev", "eth0"]]


def test_build_commands_stop_and_bad_action() -> None:
    assert mis.build_commands("stop", "br0", "10.0.0.1", 24, 4, True) == [
        ["ip", "address", "del", "10.0.0.1/24", "dev", "br0"]]
    with pytest.raises(ValueError):
        mis.build_commands("restart", "br0", "10.0.0.1", 24, 4, True)


ENV = {"MASTER_NETDEV": "eth0", "MASTER_IP": "192.0.2.1", "MASTER_NETMASK": "32",
       "CLUSTER_IP_VERSION": "4"}


def test_read_environment_validates() -> None:
    assert mis.read_environment(ENV) == ("eth0", "192.0.2.1", 32, 4)
    for bad in ({"MASTER_NETDEV": ""}, {"MASTER_IP": "x"}, {"MASTER_NETMASK": "40"},
                {"CLUSTER_IP_VERSION": "5"}, {"CLUSTER_IP_VERSION": "6"}):
        with pytest.raises(ValueError):
            mis.read_environment({**ENV, **bad})


def test_main_runs_commands_and_tolerates_benign_results() -> None:
    ran = []

    def run(argv):
        ran.append(list(argv))
        if argv[0] == "ip":
            return 2, "RTNETLINK answers: File exists\n"
        return 1, "arping: broken\n"

    assert mis.main(["start"], ENV, run=run, which=lambda name: "/usr/bin/" + name) == 0
    assert [a[0] for a in ran] == ["ip", "arping"]
    ran.clear()
    assert mis.main(["start"], ENV, run=run, which=lambda name: None) == 0
    assert [a[0] for a in ran] == ["ip"]


@pytest.mark.parametrize("action,answer", [
    ("start", "RTNETLINK answers: File exists"),
    ("start", "Error: ipv4: Address already assigned."),        # iproute2 6.x, extended ack
    ("start", "Error: ipv6: address already assigned."),
    ("stop", "RTNETLINK answers: Cannot assign requested address"),
    ("stop", "Error: ipv4: Address not found."),
    ("stop", "Error: ipv6: address not found."),
])
def test_nothing_to_do_answers_of_old_and_new_ip_are_success(action, answer) -> None:
    assert mis.main([action], ENV, run=lambda argv: (2, answer + "\n"),
                    which=lambda name: None) == 0


def test_main_reports_real_failures_and_usage(capsys) -> None:
    assert mis.main(["stop"], ENV, run=lambda argv: (2, "Cannot find device"),
                    which=lambda n: None) == 1
    assert "Cannot find device" in capsys.readouterr().err
    assert mis.main(["stop"], ENV, run=lambda argv: (2, "Cannot assign requested address"),
                    which=lambda n: None) == 0
    assert mis.main([], ENV) == 2
    assert mis.main(["start"], {**ENV, "MASTER_IP": ""}) == 1


# --- end to end on a dummy (or bridge) interface (root only) -------------------------------------

def _dummy_interface_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create a dummy network interface"
    if shutil.which("ip") is None:
        return "the 'ip' command is not installed"
    return None


def test_default_script_on_a_dummy_interface(ctx) -> None:
    reason = _dummy_interface_reason()
    if reason:
        pytest.skip(reason)
    dev = "gnttest0"
    subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=10)  # a leftover
    # a dummy interface where the kernel has the module, else a bridge with no port
    # (some container kernels have only the latter; both take addresses alike)
    failures = []
    for kind in ("dummy", "bridge"):
        res = subprocess.run(["ip", "link", "add", dev, "type", kind], capture_output=True,
                             text=True, timeout=10)
        if res.returncode == 0:
            break
        failures.append(f"{kind}: {res.stderr.strip()}")
    else:
        pytest.skip(f"cannot create a dummy or bridge interface here: {'; '.join(failures)}")
    try:
        params = dict(PARAMS, netdev=dev, ip="198.51.100.77", netmask=32)

        def addresses() -> str:
            return subprocess.run(["ip", "-o", "address", "show", "dev", dev],
                                  capture_output=True, text=True, timeout=10).stdout

        masterip.node_activate_master_ip(ctx, params, False)
        assert "198.51.100.77/32" in addresses()
        masterip.node_activate_master_ip(ctx, params, False)       # idempotent
        masterip.node_deactivate_master_ip(ctx, params, False)
        assert "198.51.100.77" not in addresses()
        masterip.node_deactivate_master_ip(ctx, params, False)     # idempotent
        with pytest.raises(errors.OpExecError, match="default"):
            masterip.node_activate_master_ip(ctx, dict(params, netdev="gntnosuch0"), False)
    finally:
        subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=10)


def test_script_file_is_executable_python() -> None:
    mode = os.stat(masterip.DEFAULT_SCRIPT).st_mode
    assert mode & stat.S_IXUSR
    with open(masterip.DEFAULT_SCRIPT) as fh:
        assert fh.readline().startswith("#!/usr/bin/env python3")
