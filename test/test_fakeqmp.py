"""The scripted QMP peer (test/fakes/fakeqmp.py) against the project's real QMP client."""

from __future__ import annotations

import os
import re
import socket

import pytest

from fakes.fakeqmp import COMMANDS, MAX_ANSWER, FakeQmp, Replies, check_command
from ganeti import errors
from ganeti.hypervisor.kvm import cmdline, hotplug, migration, mirror, qmp

KVM_DIR = os.path.join(os.path.dirname(__file__), "..", "ganeti", "hypervisor", "kvm")


def _raw(fake: FakeQmp, data: bytes) -> list[bytes]:
    """Send raw bytes on a new connection; the lines the peer answered (greeting first)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(fake.path)
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    fake.pump()
    fake.pump()                    # sees the end of the stream
    sock.settimeout(5)
    got = b""
    for _ in range(100):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    sock.close()
    return [line for line in got.split(b"\r\n") if line]


def test_the_peer_speaks_the_wire_and_answers_from_its_script():
    with FakeQmp({"query-status": Replies({"status": "paused"}, {"status": "running"}),
                  "qom-get": lambda path, property: len(path),
                  "cont": qmp.QmpCommandError("cont", "GenericError", "no guest")}) as fake:
        with fake.session() as client:
            assert client.greeting is not None and client.greeting.capabilities == ["oob"]
            assert client.execute("query-status") == {"status": "paused"}
            assert client.execute("query-status") == {"status": "running"}
            assert client.execute("query-status") == {"status": "running"}
            assert client.execute("qom-get", path="/abc", property="addr") == 4
            with pytest.raises(qmp.QmpCommandError, match="no guest") as info:
                client.execute("cont")
            assert info.value.error_class == "GenericError"
            assert client.execute("query-block") == {}
        assert fake.names() == ["query-status"] * 3 + ["qom-get", "cont", "query-block"]
        assert fake.lines[0] == {"execute": "qmp_capabilities", "id": 1}
        assert fake.lines[4] == {"execute": "qom-get", "id": 5,
                                 "arguments": {"path": "/abc", "property": "addr"}}


def test_events_follow_a_reply_or_come_when_emitted():
    with FakeQmp(after={"device_del": [("DEVICE_DELETED", {"device": "nic1"})]}) as fake:
        with fake.session() as client:
            client.execute("device_del", id="nic1")
            assert client.wait_event("DEVICE_DELETED").data == {"device": "nic1"}
            client.execute("device_del", id="nic1")      # the list was sent once
            fake.emit("SHUTDOWN", {"guest": True})
            assert client.wait_event("SHUTDOWN", timeout=1).data == {"guest": True}


def test_a_silent_peer_ends_the_wait_as_a_timeout_at_the_deadline():
    now = [0.0]
    with FakeQmp() as fake:
        with fake.session(clock=lambda: now[0],
                          on_silence=lambda deadline: now.__setitem__(0, deadline)) as client:
            with pytest.raises(qmp.QmpError, match="Timeout"):
                client.wait_event("DEVICE_DELETED", timeout=7)
    assert now[0] == 7.0


def test_every_session_is_a_new_connection_with_its_own_negotiation():
    with FakeQmp() as fake:
        for _ in range(3):
            with fake.session() as client:
                client.execute("query-status")
        assert fake.connections == 3
        assert [line["execute"] for line in fake.lines].count("qmp_capabilities") == 3


@pytest.mark.parametrize("command,arguments,error_class,desc", [
    ("query-everything", {}, "CommandNotFound", "query-everything has not been found"),
    ("device_del", {"device": "nic1"}, "GenericError", "Parameter 'id' is missing"),
    ("balloon", {"value": 1, "size": 2}, "GenericError", "Parameter 'size' is unexpected"),
    ("query-status", {"verbose": True}, "GenericError", "Parameter 'verbose' is unexpected"),
], ids=["unknown-command", "missing-argument", "extra-argument", "no-arguments-taken"])
def test_a_command_outside_the_table_is_refused_and_fails_the_test(command, arguments,
                                                                   error_class, desc):
    fake = FakeQmp()
    with fake.session() as client:
        with pytest.raises(qmp.QmpCommandError, match=desc) as info:
            client.execute(command, **arguments)
        assert info.value.error_class == error_class
    assert fake.calls == []
    with pytest.raises(AssertionError, match=f"refused: {command}: .*{desc}"):
        fake.close()


def test_open_commands_take_driver_properties():
    assert check_command("device_add", {"driver": "virtio-net-pci", "mac": "m", "id": "x"}) is None
    assert check_command("device_add", {"id": "x"}) == ("GenericError",
                                                        "Parameter 'driver' is missing")


@pytest.mark.parametrize("data,error", [
    (b'{"execute": "query-status", "id": 1}\n', b"Expecting capabilities negotiation"),
    (b"not json\n", b"JSON parse error"),
    (b"[1]\n", b"must be a JSON object"),
    (b'{"execute": "qmp_capabilities", "id": 1, "oops": 1}\n', b"'oops' is unexpected"),
], ids=["before-negotiation", "bad-json", "not-an-object", "unknown-member"])
def test_protocol_violations_get_qemus_error_and_are_kept(data, error):
    fake = FakeQmp()
    lines = _raw(fake, data)
    assert lines[0].startswith(b'{"QMP":')
    assert b'"error"' in lines[1] and error in lines[1]
    assert fake.calls == [] and len(fake.refused) == 1
    with pytest.raises(AssertionError):
        fake.close()


def test_a_second_negotiation_is_refused():
    fake = FakeQmp()
    lines = _raw(fake, b'{"execute":"qmp_capabilities","id":1}\n'
                       b'{"execute":"qmp_capabilities","id":2}\n')
    assert lines[1:] == [b'{"return":{},"id":1}',
                         b'{"error":{"class":"CommandNotFound","desc":"Capabilities negotiation'
                         b' is already complete, command ignored"},"id":2}']
    with pytest.raises(AssertionError, match="already complete"):
        fake.close()


def test_the_table_has_every_command_the_kvm_code_sends():
    sent: set[str] = set()
    for name in os.listdir(KVM_DIR):
        if name.endswith(".py"):
            with open(os.path.join(KVM_DIR, name)) as fh:
                src = fh.read()
            sent.update(re.findall(r'execute\(\s*"([\w-]+)"', src))
            sent.update(re.findall(r'_undo\(client,\s*"([\w-]+)"', src))
    sent.update(c for c, _ in migration.outgoing_commands({}, "tcp:h:1", False))
    assert len(sent) > 20
    assert sorted(sent - set(COMMANDS)) == []
    for command, arguments in migration.outgoing_commands(
            {"migration_bandwidth": 5, "migration_downtime": 100}, "tcp:h:1", False):
        assert check_command(command, arguments) is None


_TAP = hotplug.NicDevice(mac="aa:00:00:00:00:01", device="hotnic-a", netdev="hotnet-a",
                         kind=cmdline.NETDEV_TAP, ifname="gnt0")
_USER = hotplug.NicDevice(mac="aa:00:00:00:00:02", device="hotnic-b", netdev="hotnet-b")
_HOT = hotplug.DiskDevice(path="/d/1", node="hotdisk-a", device="hotvd-a")
_BOOT = hotplug.DiskDevice(path="/d/0", drive="disk0")


@pytest.mark.parametrize("command,arguments", [
    ("netdev_add", hotplug.netdev_add_args(_TAP, vhost=True)),
    ("netdev_add", hotplug.netdev_add_args(_USER)),
    ("device_add", hotplug.nic_device_args(_TAP, "paravirtual")),
    ("blockdev-add", hotplug.blockdev_add_args(_HOT, "none")),
    ("device_add", hotplug.disk_device_args(_HOT, "paravirtual", "writethrough")),
    ("block_resize", hotplug.block_resize_args(_HOT, 1 << 20)),
    ("block_resize", hotplug.block_resize_args(_BOOT, 1 << 20)),
    ("balloon", hotplug.balloon_args(64)),
    ("nbd-server-start", mirror.nbd_server_args("192.0.2.1", 10809)),
    ("block-export-add", mirror.export_args("disk0", "#block1")),
    ("drive-mirror", mirror.mirror_args("disk0", "192.0.2.1", 10809, 1 << 20)),
], ids=["netdev-tap", "netdev-user", "nic-device", "blockdev", "disk-device", "resize-node",
        "resize-drive", "balloon", "nbd-server", "export", "mirror"])
def test_the_table_takes_the_arguments_the_kvm_builders_make(command, arguments):
    assert check_command(command, arguments) is None


def test_an_answer_too_big_for_one_send_is_a_clear_error():
    with FakeQmp({"query-block": "x" * (MAX_ANSWER + 1)}) as fake:
        with fake.session() as client:
            with pytest.raises(errors.ProgrammerError, match="more than the 65536"):
                client.execute("query-block")
