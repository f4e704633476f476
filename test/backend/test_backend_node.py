"""Tests for ganeti.backend.node."""

from __future__ import annotations

import hashlib
import json
import os
import socket

import pytest

from ganeti import constants, errors
from ganeti.backend import node


def test_version(ctx) -> None:
    assert node.version(ctx) == constants.PROTOCOL_VERSION


def test_node_info_host_figures(ctx) -> None:
    info = node.node_info(ctx, [], [["fake", {}]])
    assert info["name"] == "node1.example.com"
    assert info["memory_total"] > 0 and info["cpu_total"] >= 1
    assert info["hv"][0]["name"] == "fake" and info["hv"][0]["memory_total"] == info["memory_total"]


def test_node_info_fake_override_and_file_storage(ctx) -> None:
    with open(os.path.join(ctx.paths.conf_dir, node.FAKE_NODE_INFO_FILE), "w") as fh:
        json.dump({"memory_total": 4096, "memory_free": 1000, "cpu_total": 8}, fh)
    os.makedirs(ctx.local_path("/srv/ganeti/file-storage"))
    info = node.node_info(ctx, [["file", "/srv/ganeti/file-storage", {}], ["lvm-vg", "xenvg", {}]],
                          [["fake", {}]])
    assert info["memory_total"] == 4096 and info["hv"][0]["cpu_total"] == 8
    assert info["storage"][0]["storage_size"] > 0
    assert "error" in info["storage"][1]


def test_node_info_bad_override(ctx) -> None:
    with open(os.path.join(ctx.paths.conf_dir, node.FAKE_NODE_INFO_FILE), "w") as fh:
        fh.write("[1, 2]")
    with pytest.raises(errors.OpExecError):
        node.node_info(ctx, [], [])


def test_node_verify_checks(ctx) -> None:
    with open(ctx.paths.config_file, "wb") as fh:
        fh.write(b"config")
    with open(ctx.paths.ssconf_file("cluster_name"), "w") as fh:
        fh.write("cluster.example.com\n")
    os.makedirs(ctx.paths.hooks_base_dir)
    res = node.node_verify(ctx, {
        "version": None, "time": None, "hooks": None, "hostname": None, "cluster_name": None,
        "filelist": ["/var/lib/ganeti/config.data", "/var/lib/ganeti/missing"],
        "bogus": 1}, "cluster.example.com")
    assert res["version"] == [constants.PROTOCOL_VERSION, constants.RELEASE_VERSION]
    assert res["time"] == 1234.5 and res["hooks"] is True
    assert res["hostname"] == "node1.example.com"
    assert res["cluster_name"] == "cluster.example.com"
    assert res["filelist"] == {"/var/lib/ganeti/config.data": hashlib.sha1(b"config").hexdigest(),
                               "/var/lib/ganeti/missing": None}
    assert res["unsupported"] == ["bogus"]


def test_node_verify_kvm_firmware_names_what_is_missing(ctx, monkeypatch) -> None:
    from ganeti.hypervisor.kvm import firmware
    assert node.node_verify(ctx, {"kvm_firmware": []}, "c")["kvm_firmware"] == []
    monkeypatch.setattr(firmware, "OVMF_DIR", os.path.join(ctx.paths.root, "no-ovmf"))
    monkeypatch.setattr(firmware, "SWTPM_BINARY", "no-such-swtpm")
    problems = node.node_verify(ctx, {"kvm_firmware": ["tpm2", "uefi"]}, "c")["kvm_firmware"]
    assert len(problems) == 2 and "ovmf" in problems[0] and "swtpm" in problems[1]


def test_node_verify_lists_the_kvm_firmware_states(ctx) -> None:
    base = ctx.paths.kvm_firmware_dir
    assert node.node_verify(ctx, {"kvm_firmware_states": None}, "c")["kvm_firmware_states"] == []
    for name in ("uuid-b", "uuid-a", ".in-x1y2"):     # .in-: an unpack under way
        os.makedirs(os.path.join(base, name))
    with open(os.path.join(base, "stray-file"), "w") as fh:
        fh.write("not a state directory\n")
    assert node.node_verify(ctx, {"kvm_firmware_states": None}, "c")["kvm_firmware_states"] == \
        ["uuid-a", "uuid-b"]


def test_node_verify_nodelist(ctx) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    try:
        res = node.node_verify(ctx, {"nodelist": [["up", "127.0.0.1", port],
                                                  ["down", "127.0.0.1", dead_port]]}, "c")
    finally:
        listener.close()
    assert list(res["nodelist"]) == ["down"]
    assert "refused" in res["nodelist"]["down"].lower()


def test_master_node_name(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="master node"):
        node.master_node_name(ctx)
    with open(ctx.paths.ssconf_file("master_node"), "w") as fh:
        fh.write("node1.example.com\n")
    assert node.master_node_name(ctx) == "node1.example.com"


def test_node_leave_cluster(ctx) -> None:
    stopped = []
    ctx.stop_daemon = lambda: stopped.append(True)
    for path in (ctx.paths.config_file, ctx.paths.server_pem, ctx.paths.ssconf_file("x"),
                 os.path.join(ctx.paths.queue_dir, "job-1"), ctx.paths.rapi_users_file,
                 ctx.paths.rapi_tokens_file):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("x")
    node.node_leave_cluster(ctx, False)
    assert not os.path.exists(ctx.paths.rapi_users_file)
    assert not os.path.exists(ctx.paths.rapi_tokens_file)     # the API tokens' digests
    assert not os.path.exists(ctx.paths.config_file)
    assert not os.path.exists(ctx.paths.server_pem)
    assert not os.path.exists(ctx.paths.ssconf_file("x"))
    assert os.listdir(ctx.paths.queue_dir) == []
    assert stopped == []                       # only after the answer was sent
    for callback in ctx.after_response:
        callback()
    assert stopped == [True]


def test_node_leave_cluster_stops_even_if_cleanup_fails(ctx, monkeypatch) -> None:
    from ganeti.backend import jobqueue
    stopped = []
    ctx.stop_daemon = lambda: stopped.append(True)

    def purge(_ctx):
        raise errors.OpExecError("Cannot remove from the job queue: job-1: busy")

    monkeypatch.setattr(jobqueue, "jobqueue_purge", purge)
    with open(ctx.paths.config_file, "w") as fh:
        fh.write("x")
    with pytest.raises(errors.OpExecError, match="job-1"):
        node.node_leave_cluster(ctx, False)
    assert not os.path.exists(ctx.paths.config_file)
    for callback in ctx.after_response:
        callback()
    assert stopped == [True]   # the master has forgotten the node: it stops regardless


def test_set_watcher_pause(ctx) -> None:
    assert node.set_watcher_pause(ctx, 1234.5) == 1234.5
    with open(ctx.paths.watcher_pause_file) as fh:
        assert fh.read() == "1234\n"
    node.set_watcher_pause(ctx, None)
    assert not os.path.exists(ctx.paths.watcher_pause_file)
    with pytest.raises(errors.ParameterError):
        node.set_watcher_pause(ctx, float("nan"))


def test_powercycle_answers_first_then_cycles_and_restarts(ctx) -> None:
    from ganeti.hypervisor.fake import FakeHypervisor
    events: list[str] = []
    ctx.restart_daemon = lambda: events.append("restart")
    hv = FakeHypervisor(ctx.paths, clock=ctx.clock)
    from ganeti.hypervisor import base
    hv.start_instance(base.InstanceSpec(name="i1.example.com", uuid="u1", memory=128, vcpus=1,
                                        hvparams={}, beparams={}, nics=()), [])
    message = node.node_powercycle(ctx, constants.HT_FAKE, {})
    assert "node1.example.com" in message
    assert hv.list_instances() == ["i1.example.com"] and events == []   # nothing before the answer
    assert len(ctx.after_response) == 1
    ctx.after_response[0]()
    assert hv.list_instances() == [] and events == ["restart"]
    assert hv.powercycles() == [{"time": 1234.5, "instances": ["i1.example.com"]}]


def test_powercycle_restarts_even_when_the_hypervisor_fails(ctx, monkeypatch) -> None:
    from ganeti.hypervisor.fake import FakeHypervisor
    events: list[str] = []
    ctx.restart_daemon = lambda: events.append("restart")

    def broken(self, hvparams):
        raise errors.HypervisorError("no power")

    monkeypatch.setattr(FakeHypervisor, "powercycle_node", broken)
    node.node_powercycle(ctx, constants.HT_FAKE, {})
    with pytest.raises(errors.HypervisorError):
        ctx.after_response[0]()
    assert events == ["restart"]


def test_powercycle_with_an_unknown_hypervisor_fails_at_once(ctx) -> None:
    with pytest.raises(errors.HypervisorError):
        node.node_powercycle(ctx, "nosuch", {})
    assert ctx.after_response == []


def test_node_verify_oob_paths(ctx) -> None:
    good = ctx.local_path("/opt/oob-good")
    bad = ctx.local_path("/opt/oob-not-executable")
    os.makedirs(os.path.dirname(good), exist_ok=True)
    for path, mode in ((good, 0o500), (bad, 0o400)):
        with open(path, "w") as fh:
            fh.write("#!/bin/sh\n")
        os.chmod(path, mode)
    res = node.node_verify(ctx, {"oob_paths": ["/opt/oob-good", "/opt/oob-not-executable",
                                               "/opt/oob-missing"]}, "c")
    good_msg, bad_msg, missing_msg = res["oob_paths"]
    assert good_msg == ""
    assert "not executable" in bad_msg and "/opt/oob-not-executable" in bad_msg
    assert "does not exist" in missing_msg
