"""A move between clusters carries a kvm instance's UEFI NVRAM and TPM state
(doc/exports.md, "Moves between clusters"; doc/kvm.md, "UEFI and TPM").

Upstream's own ``move-instance`` (Debian's ``ganeti-3.0``, as in
test_remote_move.py) moves a stopped kvm instance with ``firmware=uefi``
and ``tpm=tpm2`` within one 2-node kvm virtual cluster under another name:
the source's state files (planted: no boot is needed, the bytes are
compared) arrive in the new instance's state directory on its primary node,
through the extra destination our remote import announces after the disks;
the source instance and its state are gone, no key or transfer is left.
No qemu runs (the instance is stopped); skips when upstream's tools, OVMF
or swtpm are missing.
"""

from __future__ import annotations

import os
import shutil

import pytest
import upstream_cli
from instance_helpers import rows
from test_rapi import USERS, WRITER, write_users
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm import firmware

_MISSING = upstream_cli.unusable() or (
    "" if firmware.find_ovmf() else "OVMF is not installed (make debian-deps)") or (
    "" if shutil.which(firmware.SWTPM_BINARY) else "swtpm is not installed (make debian-deps)")
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(bool(_MISSING), reason=_MISSING or "upstream's tools run")]

N1, N2 = "node1.vcluster", "node2.vcluster"
SRC, DEST = "uefimove1.example.com", "uefimove2.example.com"
STATE = {firmware.VARS_FILE: b"\x55\xaa UEFI variables of the source " * 64,
         f"{firmware.TPM_STATE_DIR}/tpm2-00.permall": b"TPM seeds and keys " * 32}


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcmu"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        write_users(cluster, USERS)
        with open(os.path.join(cluster.cluster.directory, "hosts"), "a") as fh:
            fh.write(f"\n127.0.3.11 {SRC}\n127.0.3.12 {DEST}\n")
        yield cluster


def _state_dir(vc, node: str, uuid: str) -> str:
    return firmware.state_dir(vc.paths(node).kvm_firmware_dir, uuid)


def _files(top: str) -> dict[str, bytes]:
    found = {}
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                found[os.path.relpath(os.path.join(dirpath, name), top)] = fh.read()
    return found


def _leftovers(vc) -> list[str]:
    found = []
    for node in (N1, N2):
        for directory in (vc.paths(node).crypto_dir, vc.paths(node).import_export_dir):
            if os.path.isdir(directory):
                found += [os.path.join(directory, x) for x in os.listdir(directory)]
    return found


def test_move_instance_carries_the_uefi_and_tpm_state(vc, tmp_path):
    upstream_cli.prepare_host()
    vc.ok("gnt-instance", "add", "-t", "file", "-o", "tinyos", "--disk", "0:size=8M",
          "-n", N1, "--no-name-check", "--no-ip-check", "--no-start",
          "-H", "kvm:firmware=uefi,machine_version=q35,tpm=tpm2", SRC)
    ((src_uuid,),) = rows(vc, "uuid", SRC)
    source_state = _state_dir(vc, N1, src_uuid)
    for name, data in STATE.items():
        os.makedirs(os.path.dirname(os.path.join(source_state, name)), exist_ok=True)
        with open(os.path.join(source_state, name), "wb") as fh:
            fh.write(data)
    res = upstream_cli.move_instance(vc, tmp_path, WRITER, SRC, DEST, N2)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{SRC} as {DEST}: Success" in res.stderr
    assert rows(vc, "name,pnode,status,hv/firmware,hv/tpm", DEST) == \
        [[DEST, N2, "ADMIN_down", "uefi", "tpm2"]]
    ((dest_uuid,),) = rows(vc, "uuid", DEST)
    assert _files(_state_dir(vc, N2, dest_uuid)) == STATE
    # the source instance went with its state; nothing of the transfer stays
    assert SRC not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name")
    assert not os.path.exists(source_state)
    assert _leftovers(vc) == []
    vc.ok("gnt-instance", "remove", "-f", DEST)
    assert not os.path.exists(_state_dir(vc, N2, dest_uuid))
