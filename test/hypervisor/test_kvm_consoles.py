"""kvm's VNC over TLS (ganeti.hypervisor.kvm.consoles): the start's checks of the
certificate files, and what the node's console end is told about the TLS."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from ganeti import errors, pathutils, serializer
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import consoles
from ganeti.hypervisor.kvm import hypervisor as kvmhv
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from ganeti.utils import unixsock

SERVER = ("ca-cert.pem", "server-cert.pem", "server-key.pem")
CLIENT = ("client-cert.pem", "client-key.pem")


def _x509(tmp_path, names=SERVER + CLIENT) -> str:
    path = tmp_path / "vnc-x509"
    path.mkdir()
    for name in names:
        (path / name).write_text("pem\n")
    return str(path)


def _hvp(**extra) -> dict:
    return {"vnc_bind_address": "127.0.0.1", "vnc_tls": True, **extra}


def test_the_file_names_are_qemus():
    assert consoles.SERVER_FILES == SERVER and consoles.CLIENT_FILES == CLIENT


@pytest.mark.parametrize("hvp", [
    _hvp(), {"vnc_tls": True, "vnc_x509_path": "/nonexistent"},
    {"vnc_bind_address": "127.0.0.1", "vnc_x509_path": "/nonexistent",
     "vnc_x509_verify": True}],
    ids=["anonymous", "no-vnc", "tls-off"])
def test_nothing_to_check(hvp):
    consoles.check_tls(hvp, "i1")


def test_complete_directories_start(tmp_path):
    consoles.check_tls(_hvp(vnc_x509_path=_x509(tmp_path), vnc_x509_verify=True), "i1")


def test_without_client_checks_the_client_files_are_not_needed(tmp_path):
    consoles.check_tls(_hvp(vnc_x509_path=_x509(tmp_path, SERVER)), "i1")


@pytest.mark.parametrize("names, verify, match", [
    (SERVER[1:], False, "lacks ca-cert.pem$"),
    (SERVER[:2], True, "lacks server-key.pem, client-cert.pem, client-key.pem"
                       r" \(the client certificate"),
    (SERVER + CLIENT[:1], True, "lacks client-key.pem"),
], ids=["no-ca", "no-key-no-client", "no-client-key"])
def test_missing_files_refuse_the_start(tmp_path, names, verify, match):
    hvp = _hvp(vnc_x509_path=_x509(tmp_path, names), vnc_x509_verify=verify)
    with pytest.raises(errors.HypervisorError, match="Cannot start instance i1: .*" + match):
        consoles.check_tls(hvp, "i1")


def test_a_missing_directory_or_verify_without_one_refuse_the_start(tmp_path):
    with pytest.raises(errors.HypervisorError, match="is not a directory"):
        consoles.check_tls(_hvp(vnc_x509_path=str(tmp_path / "none")), "i1")
    with pytest.raises(errors.HypervisorError, match="vnc_x509_verify needs vnc_x509_path"):
        consoles.check_tls(_hvp(vnc_x509_verify=True), "i1")


def _runtime(hvp: dict) -> dict:
    spec = base.InstanceSpec(name="i1", hvparams=hvp)
    return {"spec": serializer.to_data(spec), "vnc_port": 5901}


def test_the_console_end_learns_the_tls_from_the_runtime_record():
    assert consoles.tls(_runtime({"vnc_bind_address": "127.0.0.1"})) is None
    assert consoles.tls(_runtime({"vnc_tls": True})) is None           # no VNC at all
    assert consoles.tls(None) is None
    assert consoles.tls(_runtime(_hvp())) == base.VncTls()            # anonymous
    assert consoles.tls(_runtime(_hvp(vnc_x509_path="/etc/vnc"))) == base.VncTls(
        ca_file="/etc/vnc/ca-cert.pem")
    assert consoles.tls(_runtime(_hvp(vnc_x509_path="/etc/vnc", vnc_x509_verify=True))) == \
        base.VncTls("/etc/vnc/ca-cert.pem", "/etc/vnc/client-cert.pem",
                    "/etc/vnc/client-key.pem")


def test_the_hypervisor_answers_from_the_record_it_started_with(tmp_path):
    hv = KvmHypervisor(pathutils.Paths(root=str(tmp_path)), kvm_device=str(tmp_path / "no"))
    os.makedirs(hv.instance_dir("i1"))
    with open(os.path.join(hv.instance_dir("i1"), kvmhv.RUNTIME_FILE), "w") as fh:
        fh.write(serializer.dumps({"name": "i1", "argv": [], "disks": [], "accel": "tcg",
                                   "start_time": 1.0, **_runtime(_hvp())}))
    assert hv.vnc_console_tls("i1") == base.VncTls()
    assert hv.vnc_console_tls("nosuch") is None


def test_verify_without_a_directory_is_a_bad_parameter(tmp_path):
    hv = KvmHypervisor(pathutils.Paths(root=str(tmp_path)), kvm_device=str(tmp_path / "no"))
    with pytest.raises(errors.HypervisorError, match="vnc_x509_verify needs vnc_x509_path"):
        hv.validate_parameters({"vnc_x509_verify": True})


def test_the_serial_console_command_is_socat_on_the_socket():
    assert consoles.serial_command("/run/ganeti/kvm/web1/serial.sock") == [
        "socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/run/ganeti/kvm/web1/serial.sock"]


def test_a_serial_socket_over_the_unix_limit_is_reached_from_its_directory():
    directory = "/run/ganeti/kvm-hypervisor/" + "a-very-long-instance-name." * 4 + "example.com"
    assert consoles.serial_command(f"{directory}/serial.sock") == [
        "env", "-C", directory, "socat", "STDIO,raw,echo=0,escape=0x1d",
        "UNIX-CONNECT:serial.sock"]


@pytest.mark.skipif(shutil.which("socat") is None, reason="socat not installed (make debian-deps)")
def test_the_long_path_command_attaches_a_terminal(tmp_path):
    """The command as gnt-instance console runs it (on a terminal: socat's raw
    mode needs one) reaches a socket socat could not name itself."""
    directory = tmp_path / ("i" * 60) / ("j" * 60)
    directory.mkdir(parents=True)
    path = str(directory / "serial.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        unixsock.bind(server, path)
        server.listen(1)
        server.settimeout(30)
        master, slave = os.openpty()
        proc = subprocess.Popen(consoles.serial_command(path), stdin=slave, stdout=slave,
                                stderr=subprocess.PIPE)
        os.close(slave)
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(30)
                conn.sendall(b"login: ")
                assert os.read(master, 100) == b"login: "
                os.write(master, b"root")
                assert conn.recv(100) == b"root"
            assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()
            os.close(master)
