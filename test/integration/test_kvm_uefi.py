"""A UEFI guest with an emulated TPM on a 2-node kvm virtual cluster (real qemu, OVMF, swtpm).

One ``diskless`` tinylinux instance with ``firmware=uefi``,
``machine_version=q35`` and ``tpm=tpm2``, booted by OVMF from the kernel
qemu hands it (direct kernel boot: OVMF loads it through its EFI stub,
doc/kvm.md, "UEFI and TPM").  Two boots in all.  In order: the boot went
through OVMF (the EFI stub's lines on the serial console, /sys/firmware/efi
in the guest) and the guest has /dev/tpm0; an EFI variable written in the
guest (efivarfs) is in the node's NVRAM file and still there after a
failover (a new boot on the other node, from the copied NVRAM, with the
TPM's state copied too); a second variable written there survives a live
migration back (the target's NVRAM file has it, the running guest writes
a third into it), the TPM answers with the same PCR values after the
migration (its state came with the guest), and the source's swtpm is gone;
the node left behind keeps no copy.  Then, stopped (no boot: the state
files' bytes are compared), a move to a node that cannot take the state
fails and leaves the source's copy as it was; a move that works puts the
same bytes on the target and none on the source; an export holds the
state and an import (not started) has the same bytes; remove deletes the state
on every node, a stale copy on a node the instance left too.
Skips only when qemu-system-x86_64 cannot run or OVMF/swtpm are missing.
"""

from __future__ import annotations

import os
import shutil

import pytest
import yaml
from guest_helpers import BOOT_LINE, SerialConsole, boot_count, read_log, wait_for, wait_for_line
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm import firmware
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import tinylinux
from test.integration import host_helpers

_MISSING = host_helpers.uefi_reason()
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(_MISSING), reason=_MISSING or "qemu, OVMF and swtpm run")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "uefi1.example.com"
IMPORTED = "uefi2.example.com"
#: a vendor GUID of our own for the test's EFI variables
GUID = "6a3f2d1c-5b4e-4f6a-9c8d-7e6f5a4b3c2d"
EFIVARS = "/sys/firmware/efi/efivars"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vuefi"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv(vc, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _log(vc, node: str) -> str:
    return _hv(vc, node).serial_log(INST)


def _console(vc, node: str) -> SerialConsole:
    return SerialConsole(_hv(vc, node).serial_socket(INST))


def _state_dir(vc, node: str, name: str = INST) -> str:
    (uuid,) = rows(vc, "uuid", name)[0]
    return firmware.state_dir(vc.paths(node).kvm_firmware_dir, uuid)


def _nvram(vc, node: str) -> bytes:
    with open(os.path.join(_state_dir(vc, node), firmware.VARS_FILE), "rb") as fh:
        return fh.read()


def _write_var(con: SerialConsole, name: str, value: str) -> None:
    # attributes 0x7 (non-volatile, boot and runtime access), then the data, in one write
    con.run(f"printf '\\007\\000\\000\\000{value}' > {EFIVARS}/{name}-{GUID}")


def _read_var(con: SerialConsole, name: str) -> str:
    return con.run(f"tail -c +5 {EFIVARS}/{name}-{GUID} 2>&1")


def _swtpms_of(state: str) -> list[int]:
    """Pids of swtpm processes using the TPM state directory ``state``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                words = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if words and os.path.basename(words[0]) == "swtpm" and \
                any(os.path.join(state, firmware.TPM_STATE_DIR) in w for w in words):
            found.append(int(pid))
    return found


def _pcrs(con: SerialConsole) -> str:
    return con.run("cat /sys/class/tpm/tpm0/pcr-sha256/0 /sys/class/tpm/tpm0/pcr-sha256/9")


def test_a_uefi_guest_boots_through_ovmf_with_a_tpm(vc):
    guest = tinylinux.build()
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinylinux", "--no-install",
          "-B", "maxmem=256,minmem=256", "-n", N1, *NOCHECK,
          "-H", f"kvm:firmware=uefi,machine_version=q35,tpm=tpm2,migration_bandwidth=512,"
                f"kernel_path={guest.kernel},"
                f"initrd_path={guest.initrd},root_path=,kernel_args=tinylinux.hostname={INST}",
          INST)
    assert wait_for_line(_log(vc, N1)) == f"{BOOT_LINE} {INST}"
    log = read_log(_log(vc, N1))
    # OVMF ran: it started the kernel through its EFI stub, which says so
    assert "EFI stub:" in log, log[:2000]
    with open(f"/proc/{_hv(vc, N1)._pid(INST)}/cmdline", "rb") as fh:
        argv = fh.read().decode().split("\0")
    assert "q35" in argv[argv.index("-machine") + 1]
    assert "tpm-tis,tpmdev=tpm0" in argv
    with _console(vc, N1) as con:
        assert con.run(f"test -d {EFIVARS} && echo efi") == "efi"
        assert con.run("test -c /dev/tpm0 && echo tpm") == "tpm"
    (inst,) = yaml.safe_load(vc.ok("gnt-instance", "info", INST))
    shown = yaml.safe_dump(inst)
    for word in ("firmware: uefi", "machine_version: q35", "tpm: tpm2"):
        assert word in shown, shown
    assert "ENODEHV" not in vc.ok("gnt-cluster", "verify")


def test_an_efi_variable_survives_a_failover(vc):
    with _console(vc, N1) as con:
        _write_var(con, "GntFailover", "before-failover")
        assert _read_var(con, "GntFailover") == "before-failover"
    # written through to the node's NVRAM file (UTF-16 names in the variable store)
    assert "GntFailover".encode("utf-16-le") in _nvram(vc, N1)
    vc.ok("gnt-instance", "failover", "-f", INST)
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert wait_for_line(_log(vc, N2)) == f"{BOOT_LINE} {INST}"
    assert os.path.exists(os.path.join(_state_dir(vc, N2), firmware.TPM_STATE_DIR,
                                       "tpm2-00.permall"))
    with _console(vc, N2) as con:
        assert _read_var(con, "GntFailover") == "before-failover"
        assert con.run("test -c /dev/tpm0 && echo tpm") == "tpm"
    assert _swtpms_of(_state_dir(vc, N1)) == []
    # the node it left keeps no stale copy
    assert not os.path.exists(_state_dir(vc, N1))


def test_efi_variables_and_the_tpm_survive_a_live_migration(vc):
    with _console(vc, N2) as con:
        _write_var(con, "GntMigrate", "before-migration")
        pcrs = _pcrs(con)
    assert len(pcrs.split()) == 2 and pcrs.split()[1].strip("0"), pcrs
    boots = boot_count(_log(vc, N2))
    vc.ok("gnt-instance", "migrate", "-f", INST)
    assert rows(vc, "pnode,status", INST) == [[N1, "running"]]
    # the same guest (no new boot), with its variables, its TPM and the TPM's PCRs
    wait_for(lambda: os.path.exists(_hv(vc, N1).serial_socket(INST)), "the console on node1")
    assert boot_count(_log(vc, N1)) == 0 and boots == 1
    assert "GntMigrate".encode("utf-16-le") in _nvram(vc, N1)
    with _console(vc, N1) as con:
        assert _read_var(con, "GntFailover") == "before-failover"
        assert _read_var(con, "GntMigrate") == "before-migration"
        assert con.run("test -c /dev/tpm0 && echo tpm") == "tpm"
        assert _pcrs(con) == pcrs
        _write_var(con, "GntAfter", "after-migration")
    # the migrated qemu writes the NVRAM file of its own node
    assert "GntAfter".encode("utf-16-le") in _nvram(vc, N1)
    wait_for(lambda: not _swtpms_of(_state_dir(vc, N2)), "the source's swtpm gone", timeout=30)
    assert _swtpms_of(_state_dir(vc, N1))
    assert not os.path.exists(_state_dir(vc, N2))


def _state_files(vc, node: str, name: str = INST) -> dict[str, bytes]:
    """The files of the instance's state directory on ``node``, by relative name."""
    top, found = _state_dir(vc, node, name), {}
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                found[os.path.relpath(os.path.join(dirpath, name), top)] = fh.read()
    return found


def test_move_carries_the_state_and_a_failed_move_keeps_the_source_copy(vc):
    # no boot here: the move is the point, so the state files' bytes are compared
    vc.ok("gnt-instance", "shutdown", INST)
    state = _state_files(vc, N1)
    assert firmware.VARS_FILE in state and "tpm/tpm2-00.permall" in state, sorted(state)
    assert "GntAfter".encode("utf-16-le") in state[firmware.VARS_FILE]
    # a target that cannot take the state: the move fails, the only copy stays
    base = vc.paths(N2).kvm_firmware_dir
    os.rename(base, base + ".aside")
    try:
        with open(base, "w") as fh:
            fh.write("not a directory\n")
        res = vc.run("gnt-instance", "move", "-f", "-n", N2, INST)
        assert res.returncode != 0 and "UEFI/TPM state" in res.stdout + res.stderr, res
        assert rows(vc, "pnode", INST) == [[N1]]
        assert _state_files(vc, N1) == state
    finally:
        os.unlink(base)
        os.rename(base + ".aside", base)
    vc.ok("gnt-instance", "move", "-f", "-n", N2, INST)
    assert rows(vc, "pnode,status", INST) == [[N2, "ADMIN_down"]]
    assert _state_files(vc, N2) == state
    assert not os.path.exists(_state_dir(vc, N1))


def test_an_export_carries_the_state_and_an_import_restores_it(vc):
    # no boot either: the imported instance is not started, its state files are compared
    state = _state_files(vc, N2)
    vc.ok("gnt-backup", "export", "-n", N1, INST)
    with open(os.path.join(vc.paths(N1).export_dir, INST, "config.ini")) as fh:
        assert "firmware_state = " in fh.read()
    vc.ok("gnt-backup", "import", "-n", N1, "--src-node", N1, "--src-dir", INST, "--no-start",
          "--net", "0:mac=generate",
          *NOCHECK, IMPORTED)
    assert rows(vc, "pnode,status,hv/firmware,hv/tpm", IMPORTED) == \
        [[N1, "ADMIN_down", "uefi", "tpm2"]]
    assert _state_files(vc, N1, IMPORTED) == state
    imported = _state_dir(vc, N1, IMPORTED)
    vc.ok("gnt-instance", "remove", "-f", IMPORTED)
    vc.ok("gnt-backup", "remove", INST)
    assert not os.path.exists(imported)


def test_remove_removes_the_state_from_every_node(vc):
    # a stale copy on a node the instance left while it did not answer
    shutil.copytree(_state_dir(vc, N2), _state_dir(vc, N1))
    states = [_state_dir(vc, N1), _state_dir(vc, N2)]
    vc.ok("gnt-instance", "remove", "-f", INST)
    for state in states:
        assert not os.path.exists(state)
        assert _swtpms_of(state) == []
