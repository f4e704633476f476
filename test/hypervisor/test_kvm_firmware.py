"""The UEFI NVRAM and TPM pieces of the kvm hypervisor (ganeti/hypervisor/kvm/firmware.py).

Pure choices on their words; the state directory on real files; swtpm as
a real process when it is installed (Debian swtpm).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest

from ganeti import errors
from ganeti.hypervisor.kvm import firmware

UEFI = {"firmware": "uefi", "tpm": "none"}
UEFI_TPM = {"firmware": "uefi", "tpm": "tpm2"}


def _ovmf_dir(tmp_path, names=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd", "OVMF_CODE.fd",
                               "OVMF_VARS.fd")) -> str:
    d = tmp_path / "OVMF"
    d.mkdir()
    for name in names:
        (d / name).write_bytes(name.encode() * 4)
    return str(d)


def test_the_4m_pair_is_preferred_then_the_2m_one(tmp_path):
    d = _ovmf_dir(tmp_path)
    assert firmware.find_ovmf(d) == firmware.Ovmf(os.path.join(d, "OVMF_CODE_4M.fd"),
                                                  os.path.join(d, "OVMF_VARS_4M.fd"))
    os.unlink(os.path.join(d, "OVMF_VARS_4M.fd"))      # half a pair does not count
    assert firmware.find_ovmf(d).code.endswith("/OVMF_CODE.fd")
    os.unlink(os.path.join(d, "OVMF_CODE.fd"))
    assert firmware.find_ovmf(d) is None


def test_which_instances_have_state():
    assert not firmware.needs_state({"firmware": "bios", "tpm": "none"})
    assert not firmware.needs_state({})
    assert firmware.needs_state(UEFI) and firmware.needs_state({"tpm": "tpm2"})
    assert firmware.starter("/x", {"firmware": "bios"}) is None


def test_state_dir_is_keyed_and_refuses_path_tricks():
    assert firmware.state_dir("/var/lib/ganeti/kvm-firmware", "u-1") == \
        "/var/lib/ganeti/kvm-firmware/u-1"
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(errors.ProgrammerError):
            firmware.state_dir("/d", bad)


def test_prepare_copies_the_template_once_and_keeps_the_guests_writes(tmp_path):
    d = _ovmf_dir(tmp_path)
    sdir = str(tmp_path / "state" / "u1")
    firmware.prepare(sdir, UEFI_TPM, ovmf_dir=d)
    nvram = firmware.nvram_path(sdir)
    with open(nvram, "rb") as fh:
        assert fh.read() == b"OVMF_VARS_4M.fd" * 4
    assert os.stat(nvram).st_mode & 0o777 == 0o600
    assert os.path.isdir(os.path.join(sdir, firmware.TPM_STATE_DIR))
    with open(nvram, "wb") as fh:
        fh.write(b"written by the guest")
    firmware.prepare(sdir, UEFI, ovmf_dir=d)       # a later start keeps it
    with open(nvram, "rb") as fh:
        assert fh.read() == b"written by the guest"


def test_prepare_without_ovmf_says_which_package(tmp_path):
    with pytest.raises(errors.HypervisorError, match="ovmf"):
        firmware.prepare(str(tmp_path / "s"), UEFI, ovmf_dir=str(tmp_path / "none"))


def test_pflash_words_and_retarget_to_another_nodes_paths():
    argv = ["qemu", "-m", "256", *firmware.pflash_args("/a/code.fd", "/n1/u1/OVMF_VARS.fd"),
            "-drive", "file=/n1/disk0,format=raw,if=virtio,id=disk0"]
    out = firmware.retarget(argv, "/a/code.fd", "/n2/u1/OVMF_VARS.fd")
    assert out == ["qemu", "-m", "256", *firmware.pflash_args("/a/code.fd", "/n2/u1/OVMF_VARS.fd"),
                   "-drive", "file=/n1/disk0,format=raw,if=virtio,id=disk0"]
    assert firmware.pflash_args("/a,b", "/c")[1].endswith("file=/a,,b")


def test_swtpm_command_terminates_with_qemu():
    argv = firmware.swtpm_command("/usr/bin/swtpm", "/state/u1/tpm")
    assert argv[:3] == ["/usr/bin/swtpm", "socket", "--tpm2"]
    assert argv[argv.index("--tpmstate") + 1] == "dir=/state/u1/tpm,mode=0600"
    assert argv[argv.index("--ctrl") + 1] == "type=unixio,path=swtpm.sock,mode=0600"
    assert "--terminate" in argv and "--daemon" in argv


def test_pack_and_unpack_move_the_whole_state(tmp_path):
    src, dst = str(tmp_path / "n1" / "u1"), str(tmp_path / "n2" / "u1")
    os.makedirs(os.path.join(src, "tpm"))
    with open(os.path.join(src, firmware.VARS_FILE), "wb") as fh:
        fh.write(b"\xff" * 4096 + b"var")
    with open(os.path.join(src, "tpm", "tpm2-00.permall"), "wb") as fh:
        fh.write(b"tpm state")
    assert firmware.pack(str(tmp_path / "nothing")) is None
    os.makedirs(os.path.join(dst, "tpm"))
    with open(os.path.join(dst, "stale"), "w") as fh:
        fh.write("old")
    firmware.unpack(firmware.pack(src), dst)
    assert sorted(os.listdir(dst)) == [firmware.VARS_FILE, "tpm"]
    with open(os.path.join(dst, "tpm", "tpm2-00.permall"), "rb") as fh:
        assert fh.read() == b"tpm state"
    with open(os.path.join(dst, firmware.VARS_FILE), "rb") as fh:
        assert fh.read().endswith(b"var")
    assert sorted(os.listdir(os.path.dirname(dst))) == ["u1"]     # nothing left beside it
    firmware.remove_state(dst)
    assert not os.path.exists(dst)


@pytest.mark.parametrize("word", [f"if=pflash,format=raw,unit=1,file={{sdir}}/{firmware.VARS_FILE}",
                                  "dir={sdir}/tpm,mode=0600"])
def test_remove_state_is_refused_while_a_process_uses_it(tmp_path, word):
    sdir = str(tmp_path / "u1")
    os.makedirs(os.path.join(sdir, "tpm"))
    nvram = os.path.join(sdir, firmware.VARS_FILE)
    with open(nvram, "wb") as fh:
        fh.write(b"vars")
    # as qemu names its NVRAM, swtpm its state directory, on the command line; one
    # process without children (a shell's forked "sleep" still shows the shell's
    # command line until it execs, and could outlive the kill below)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                             word.format(sdir=sdir)])
    try:
        wait = time.monotonic() + 10
        while proc.pid not in firmware.users(sdir) and time.monotonic() < wait:
            time.sleep(0.02)
        with pytest.raises(errors.HypervisorError, match=f"in use .pid {proc.pid}"):
            firmware.remove_state(sdir)
        assert firmware.users(str(tmp_path / "u10")) == []     # a prefix is not a user
    finally:
        proc.kill()
        proc.wait()
    assert os.path.exists(nvram)
    assert firmware.users(sdir) == []
    firmware.remove_state(sdir)
    assert not os.path.exists(sdir)
    firmware.remove_state(sdir)        # none: nothing to do


@pytest.mark.parametrize("name,kind", [("../escape", tarfile.REGTYPE), ("/abs", tarfile.REGTYPE),
                                       ("link", tarfile.SYMTYPE)])
def test_unpack_refuses_entries_outside_or_not_plain(tmp_path, name, kind):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
        tar.addfile(info, io.BytesIO(b""))
    dst = str(tmp_path / "state" / "u1")
    with pytest.raises(errors.HypervisorError, match="Bad entry"):
        firmware.unpack(buf.getvalue(), dst)
    assert not os.path.exists(dst) and os.listdir(tmp_path / "state") == []


def test_missing_names_what_a_node_lacks(tmp_path):
    d = _ovmf_dir(tmp_path)
    assert firmware.missing(["uefi", "tpm2"], d, which=lambda b: "/usr/bin/" + b) == []
    problems = firmware.missing(["tpm2", "uefi"], str(tmp_path / "none"), which=lambda b: None)
    assert len(problems) == 2
    assert "ovmf" in problems[0] and "swtpm" in problems[1]
    assert firmware.missing([], str(tmp_path / "none"), which=lambda b: None) == []


@pytest.mark.skipif(shutil.which("swtpm") is None, reason="swtpm (Debian swtpm) not installed")
def test_swtpm_starts_with_its_socket_and_stops(tmp_path):
    sdir, run = str(tmp_path / "state"), str(tmp_path / "run")
    os.makedirs(run)
    firmware.prepare(sdir, {"tpm": "tpm2"})
    firmware.start_swtpm(sdir, run)
    try:
        assert os.path.exists(os.path.join(run, firmware.SWTPM_SOCKET))
        with open(os.path.join(run, firmware.SWTPM_PIDFILE)) as fh:
            pid = int(fh.read())
        with open(f"/proc/{pid}/comm") as fh:
            assert fh.read().strip() == "swtpm"
    finally:
        firmware.stop_swtpm(run)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/comm").read().strip() != "swtpm"
    assert not os.path.exists(os.path.join(run, firmware.SWTPM_SOCKET))
    firmware.stop_swtpm(run)        # nothing running: a no-op
