"""gnt-backup on a real 3-node virtual cluster: export/import round trips and failures.

Tests run in file order on one cluster.  The disk data is checked through
the image files under the node roots (SHA-256 of the source disk, of the
export image and of the imported disk); the failure tests check that no
export is listed, no staging directory or partial image is left, that an
instance the export stopped runs again, and that a failed import leaves
neither config entry nor disk files.
"""

from __future__ import annotations

import glob
import hashlib
import os
import signal
import time

import pytest
from host_helpers import mount_tmpfs, skip_unless, umount
from instance_helpers import NOCHECK, disk_files, install_os, rows, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.impexp import info as exportinfo
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
FILE1 = "bfile1.example.com"
SHARED1 = "bshared1.example.com"
DLESS1 = "bdless1.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcb"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def _sha(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _disks(vc, name: str) -> list[str]:
    """The disk image paths of an instance (from gnt-instance info; shared ones too)."""
    import yaml
    (info,) = yaml.safe_load(vc.ok("gnt-instance", "info", name))
    (pnode,) = rows(vc, "pnode", name)[0]
    paths = [disk["logical_id"][-1] for disk in info["Disks"]]
    return [p if os.path.exists(p) else vc.paths(pnode).root + p for p in paths]


def _export_dir(vc, node: str) -> str:
    return vc.paths(node).export_dir


def _exports(vc, *nodes: str) -> list[list[str]]:
    args = [a for n in nodes for a in ("--node", n)]
    out = vc.ok("gnt-backup", "list", "--no-headers", "--separator", "|", *args)
    return [line.split("|") for line in out.splitlines() if line]


def _leftovers(vc, node: str, name: str) -> list[str]:
    base = _export_dir(vc, node)
    return sorted(glob.glob(os.path.join(base, name + ".new*"))
                  + glob.glob(os.path.join(base, name, "*.partial")))


def _round_trip(vc, name: str, template: str, src: str, target: str, dest: str,
                import_args: list[str], *, remove: bool = False) -> str:
    before = [_sha(p) for p in _disks(vc, name)]
    out = vc.ok("gnt-backup", "export", "-n", target, *(["--remove-instance"] if remove else []),
                name)
    assert "disk/0" in out or template == "diskless"
    if remove:
        assert name not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()
    else:
        assert status_of(vc, name) == "running"        # stopped for the copy, started again
    assert [target, name] in _exports(vc)
    conf = open(os.path.join(_export_dir(vc, target), name, "config.ini")).read()
    info = exportinfo.parse(conf)
    assert (info.name, info.disk_template, info.os, info.source) == (name, template, "tinyos",
                                                                      src)
    images = [os.path.join(_export_dir(vc, target), name, d.dump) for d in info.disks]
    assert [_sha(p) for p in images] == before
    if not remove:
        vc.ok("gnt-instance", "remove", "-f", name)
    vc.ok("gnt-backup", "import", "-n", dest, *import_args, *NOCHECK, name)
    (row,) = rows(vc, "status,pnode,disk_template,os", name)
    assert row == ["running", dest, template, "tinyos"]
    assert [_sha(p) for p in _disks(vc, name)] == before
    return out


def test_round_trip_file_with_progress_and_checksum(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "--disk", "1:size=4M",
          "-o", "tinyos", "-n", N1, "-B", "maxmem=256,vcpus=2",
          "--net", "0:mac=aa:00:00:00:0b:01,ip=192.0.2.31", *NOCHECK, FILE1)
    out = _round_trip(vc, FILE1, "file", N1, N2, N3, ["--src-node", N2])
    # progress in the job log: bytes done, total, rate; the checksum checked
    assert "disk/0: 8.0 MiB of 8.0 MiB (100%)" in out and "MiB/s" in out
    assert "disk/1: 4.0 MiB of 4.0 MiB (100%)" in out and "checked on arrival" in out
    (row,) = rows(vc, "be/maxmem,be/vcpus,nic.macs,nic.ips,disk.sizes", FILE1)
    assert row == ["256", "2", "aa:00:00:00:0b:01", "192.0.2.31", "8,4"]


def test_round_trip_sharedfile(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=4M", "-o", "tinyos",
          "-n", N2, *NOCHECK, SHARED1)
    # the directory as a path, as burnin gives it
    _round_trip(vc, SHARED1, "sharedfile", N2, N3, N1,
                ["--src-node", N3, "--src-dir", f"/srv/ganeti/export/{SHARED1}"])


def test_round_trip_diskless(vc):
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N3, *NOCHECK, DLESS1)
    # export and remove in one go; the import finds the export by its name
    _round_trip(vc, DLESS1, "diskless", N3, N1, N2, [], remove=True)


def test_list_by_node_fields_and_remove(vc):
    assert sorted(_exports(vc)) == sorted([[N2, FILE1], [N3, SHARED1], [N1, DLESS1]])
    assert _exports(vc, N3) == [[N3, SHARED1]]
    fields = vc.ok("gnt-backup", "list-fields", "--no-headers")
    assert sorted(line.split()[0] for line in fields.splitlines()) == ["export", "node"]
    vc.ok("gnt-backup", "remove", SHARED1)
    assert [N3, SHARED1] not in _exports(vc)
    assert not os.path.exists(os.path.join(_export_dir(vc, N3), SHARED1))


def test_export_again_replaces_and_moves(vc):
    # FILE1 runs on N3 now; its old export is on N2: a new export to N1 removes it
    vc.ok("gnt-backup", "export", "-n", N1, FILE1)
    assert [e for e in _exports(vc) if e[1] == FILE1] == [[N1, FILE1]]
    vc.ok("gnt-backup", "export", "-n", N1, "--noshutdown", FILE1)
    assert [e for e in _exports(vc) if e[1] == FILE1] == [[N1, FILE1]]
    assert _leftovers(vc, N1, FILE1) == []


def test_import_of_an_upstream_style_export(vc):
    name = "upstream1.example.com"
    directory = os.path.join(_export_dir(vc, N1), name)
    os.makedirs(directory)
    image = os.path.join(directory, "0123-disk0.snap")
    with open(image, "wb") as fh:
        fh.write(b"UPSTREAM-IMAGE" + bytes(range(256)) * 4096)
        fh.truncate(2 << 20)
    # as upstream Ganeti 2.16/3.0 writes it (keys it has and we do not use included)
    with open(os.path.join(directory, "config.ini"), "w") as fh:
        fh.write(f"""[export]
version = 0
timestamp = 1700000000
source = oldnode.example.com
os = tinyos
compression = none

[instance]
name = {name}
maxmem = 192
minmem = 128
memory = 192
vcpus = 1
disk_template = file
hypervisor = fake
tags = imported web
nic0_mac = aa:00:00:00:0c:01
nic0_ip = None
nic0_network = None
nic0_name = None
nic0_mode = bridged
nic0_link = xen-br0
nic0_vlan =
nic_count = 1
disk0_ivname = disk/0
disk0_dump = 0123-disk0.snap
disk0_size = 4
disk0_name = None
disk_count = 1

[hypervisor]
migration_mode = live

[backend]
maxmem = 192
minmem = 128
vcpus = 1
spindle_use = 1
auto_balance = True
always_failover = False

[os]

[os_private]
""")
    vc.ok("gnt-backup", "import", "-n", N2, *NOCHECK, name)   # found on N1 by its name
    (row,) = rows(vc, "status,disk_template,be/maxmem,be/minmem,nic.macs,nic.links,tags,"
                  "disk.sizes", name)
    assert row == ["running", "file", "192", "128", "aa:00:00:00:0c:01", "xen-br0",
                   "imported,web", "4"]
    (disk,) = disk_files(vc, N2, name)
    with open(disk, "rb") as fh:
        assert fh.read(2 << 20) == open(image, "rb").read()


# --- failures --------------------------------------------------------------------------------

_FAIL_EXPORT = "#!/bin/sh\necho 'export: cannot read the disk' >&2\nexit 3\n"
_FAIL_IMPORT = "#!/bin/sh\ncat >/dev/null\necho 'import: no filesystem' >&2\nexit 4\n"


def _failing_instance(vc, name: str, osname: str, scripts: dict[str, str]) -> None:
    install_os(vc, osname, scripts)
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=4M", "-o", osname, "-n", N1,
          *NOCHECK, name)


def test_failing_os_export_script_leaves_nothing_and_restarts(vc):
    name = "bfail1.example.com"
    _failing_instance(vc, name, "failexport", {"export": _FAIL_EXPORT})
    res = vc.run("gnt-backup", "export", "-n", N2, name)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "exit code 3" in res.stdout + res.stderr
    assert "cannot read the disk" in res.stdout + res.stderr
    assert [e for e in _exports(vc) if e[1] == name] == []
    assert _leftovers(vc, N2, name) == []
    assert status_of(vc, name) == "running"


def test_failing_os_import_script_leaves_no_instance(vc):
    name = "bfail2.example.com"
    _failing_instance(vc, name, "failimport", {"import": _FAIL_IMPORT,
                                               "export": "#!/bin/sh\ncat \"$EXPORT_DISK_PATH\"\n"})
    vc.ok("gnt-backup", "export", "-n", N3, name)
    vc.ok("gnt-instance", "remove", "-f", name)
    res = vc.run("gnt-backup", "import", "-n", N2, *NOCHECK, name)
    assert res.returncode == 1 and "exit code 4" in res.stdout + res.stderr
    assert name not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()
    assert disk_files(vc, N2, name) == []
    assert [N3, name] in _exports(vc)        # the export itself is untouched


def test_target_disk_full_leaves_nothing_and_restarts(vc):
    mount = _export_dir(vc, N3)
    os.makedirs(mount, exist_ok=True)
    skip_unless(mount_tmpfs(mount, "2m", "a full export target"))
    try:
        res = vc.run("gnt-backup", "export", "-n", N3, FILE1)   # 12 MiB of disks
        assert res.returncode == 1, res.stdout + res.stderr
        assert "No space left" in res.stdout + res.stderr
        assert [e for e in _exports(vc, N3)] == []
        assert os.listdir(mount) == []
    finally:
        umount(mount)
    assert status_of(vc, FILE1) == "running"


_SLOW_EXPORT = """#!/bin/sh
dd if="$EXPORT_DISK_PATH" bs=1048576 count=1 2>/dev/null
i=0
while [ ! -e "$EXPORT_DISK_PATH.go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
dd if="$EXPORT_DISK_PATH" bs=1048576 skip=1 2>/dev/null
"""


def _kill_node(vc, node: str) -> None:
    """Stop every process of the node: its daemons and their children (a dead node)."""
    root = vc.paths(node).root
    vcluster.stop(vc.cluster, node)
    marker = f"{constants.ENV_ROOTDIR}={root}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


def test_target_node_dying_mid_copy(vc):
    name = "bslow1.example.com"
    _failing_instance(vc, name, "slowexport", {"export": _SLOW_EXPORT})
    (disk,) = disk_files(vc, N1, name)
    res = vc.run("gnt-backup", "export", "--submit", "-n", N2, name)
    assert res.returncode == 0, res.stderr
    job = res.stderr.split("JobID:")[1].split()[0]
    staging = os.path.join(_export_dir(vc, N2), name + ".new")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        partial = glob.glob(os.path.join(staging, "*.partial"))
        if partial and os.path.getsize(partial[0]) >= 1 << 20:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the copy did not start")
    _kill_node(vc, N2)
    try:
        open(disk + ".go", "w").close()
        out = vc.run("gnt-job", "watch", job).stdout
        info = vc.ok("gnt-job", "info", job)
        assert "error" in vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job)
        assert "disk/0" in out + info
    finally:
        vcluster.start(vc.cluster, N2)
    assert status_of(vc, name) == "running"
    assert [e for e in _exports(vc) if e[1] == name] == []
    # the next export there clears what the dead node left
    vc.ok("gnt-backup", "export", "-n", N2, name)
    assert [N2, name] in _exports(vc) and _leftovers(vc, N2, name) == []
