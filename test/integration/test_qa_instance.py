"""Scenarios of Ganeti's QA (``qa/qa_instance.py``) on a 2-node virtual cluster.

Each test runs the commands one QA test runs and expects what it expects
(success, or ``fail=True``: a non-zero exit that changes nothing).  One
cluster is shared by the module; each test makes its own instance.
"""

from __future__ import annotations

import os
import shutil

import pytest
from instance_helpers import (NOCHECK, disk_files, fail_unchanged, fake_hv, install_os, rows,
                              status_of)
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(240)

N1, N2 = "node1.vcluster", "node2.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcqa"), nodes=2) as cluster:
        yield cluster


def _add(vc, name: str, template: str = "file", *extra: str) -> None:
    vc.ok("gnt-instance", "add", "-t", template, "--disk", "0:size=8M", "-o", "tinyos",
          "-n", N1, *NOCHECK, *extra, name)


def test_reboot_starts_a_stopped_instance(vc):
    # TestInstanceReboot: shutdown, then reboot; the instance is running again
    name = "reboot.example.com"
    _add(vc, name)
    vc.ok("gnt-instance", "shutdown", name)
    assert status_of(vc, name) == "ADMIN_down"
    vc.ok("gnt-instance", "reboot", name)
    assert rows(vc, "status,admin_state", name) == [["running", "up"]]
    assert fake_hv(vc, N1).get_instance_state(name) is not None


def test_modify_offline_or_online_of_a_running_instance_fails(vc):
    # TestInstanceModify: both fail while the instance runs; TestInstanceStoppedModify:
    # both work once it is stopped
    name = "online.example.com"
    _add(vc, name)
    fail_unchanged(vc, "gnt-instance", "modify", "--offline", name, expect="marked to be up")
    fail_unchanged(vc, "gnt-instance", "modify", "--online", name, expect="marked to be up")
    assert rows(vc, "status,admin_state", name) == [["running", "up"]]
    vc.ok("gnt-instance", "shutdown", name)
    vc.ok("gnt-instance", "modify", "--online", name)
    vc.ok("gnt-instance", "modify", "--offline", name)
    assert rows(vc, "status,admin_state", name) == [["ADMIN_offline", "offline"]]
    vc.ok("gnt-instance", "modify", "--online", name)
    assert rows(vc, "status,admin_state", name) == [["ADMIN_down", "down"]]


def test_recreate_disks_over_existing_disks_fails(vc):
    # TestRecreateDisks: refused while running; "Disks exist: this should fail" once
    # stopped; in place once the disks are destroyed
    name = "recreate.example.com"
    _add(vc, name)
    fail_unchanged(vc, "gnt-instance", "recreate-disks", name, expect="stop it")
    vc.ok("gnt-instance", "stop", name)
    fail_unchanged(vc, "gnt-instance", "recreate-disks", name, expect="exists")
    (disk,) = disk_files(vc, N1, name)
    os.unlink(disk)
    vc.ok("gnt-instance", "recreate-disks", name)
    assert disk_files(vc, N1, name) == [disk] and os.path.getsize(disk) == 8 << 20
    vc.ok("gnt-instance", "activate-disks", name)
    vc.ok("gnt-instance", "deactivate-disks", name)
    # spindles without exclusive storage fail; resized disks are recreated
    os.unlink(disk)
    fail_unchanged(vc, "gnt-instance", "recreate-disks", "--disk=0:size=16M,spindles=1", name,
                   expect="exclusive storage")
    vc.ok("gnt-instance", "recreate-disks", "--disk=0:size=16M", name)
    assert os.path.getsize(disk) == 16 << 20
    assert rows(vc, "disk.sizes", name) == [["16"]]
    # "Move disks away" (-n, -I hail, -I .), then "Move disks back" (each time after
    # destroying them)
    for how in (["-n", N2], ["-I", "hail"], ["-I", "."], ["-n", N1]):
        (pnode,) = rows(vc, "pnode", name)[0]
        (gone,) = disk_files(vc, pnode, name)
        os.unlink(gone)
        vc.ok("gnt-instance", "recreate-disks", *how, name)
        (there,) = rows(vc, "pnode", name)[0]
        assert len(disk_files(vc, there, name)) == 1
        if how[0] == "-n":
            assert there == how[1]
    vc.ok("gnt-instance", "start", name)
    assert status_of(vc, name) == "running"


@pytest.mark.parametrize("dev,options", [("disk", ",size=8M"), ("net", "")])
def test_device_added_by_index_is_removed_by_name(vc, dev, options):
    # TestInstanceDeviceNames: -1:add,name=test_device, then test_device:remove
    name = f"names-{dev}.example.com"
    _add(vc, name)
    field = "disk.names" if dev == "disk" else "nic.names"
    vc.ok("gnt-instance", "modify", f"--{dev}=-1:add,name=test_device{options}",
          "--no-hotplug", name)
    assert rows(vc, field, name) == [["-,test_device"]]
    if dev == "disk":
        vc.ok("gnt-instance", "stop", name)     # ours removes a disk only when stopped
    vc.ok("gnt-instance", "modify", f"--{dev}=test_device:remove", "--no-hotplug", name)
    assert rows(vc, field, name) == [["-"]]
    fail_unchanged(vc, "gnt-instance", "modify", f"--{dev}=test_device:remove", name,
                   expect="Cannot find")
    # two new devices of one name, and a name that reads as an index, are refused
    fail_unchanged(vc, "gnt-instance", "modify", f"--{dev}=-1:add,name=test_device{options}",
                   f"--{dev}=-1:add,name=test_device{options}", "--no-hotplug", name)
    fail_unchanged(vc, "gnt-instance", "modify", f"--{dev}=-1:add,name=2{options}",
                   "--no-hotplug", name)


def test_spindles_are_refused_without_exclusive_storage(vc):
    # TestInstanceModifyDisks (spindles unsupported): add with spindles fails, without works
    name = "spindles.example.com"
    _add(vc, name)
    fail_unchanged(vc, "gnt-instance", "modify", "--disk", "add:size=8M,spindles=1",
                   "--no-hotplug", name, expect="exclusive storage")
    vc.ok("gnt-instance", "modify", "--disk", "add:size=8M", "--no-hotplug", name)
    assert rows(vc, "disk.count", name) == [["2"]]
    fail_unchanged(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M,spindles=1",
                   "-o", "tinyos", "-n", N1, *NOCHECK, "spindles2.example.com",
                   expect="exclusive storage")


def test_migrate_of_a_stopped_instance_needs_allow_failover(vc):
    # TestInstanceMigrate: after shutdown, migrate --force fails; with --allow-failover
    # it works; started again, migrate --force works
    name = "migrate.example.com"
    _add(vc, name, "sharedfile")
    vc.ok("gnt-instance", "shutdown", name)
    fail_unchanged(vc, "gnt-instance", "migrate", "--force", name, expect="--allow-failover")
    vc.ok("gnt-instance", "migrate", "--force", "--allow-failover", name)
    assert rows(vc, "pnode,status", name) == [[N2, "ADMIN_down"]]
    vc.ok("gnt-instance", "start", name)
    vc.ok("gnt-instance", "migrate", "--force", name)
    assert rows(vc, "pnode,status", name) == [[N1, "running"]]
    # with always_failover the instance is failed over (started anew), else migrated
    for always, there, here in (("true", N2, N1), ("false", N1, N2)):
        vc.ok("gnt-instance", "modify", "-B", f"always_failover={always}", name)
        before = fake_hv(vc, here).get_instance_state(name)["start_time"]
        out = vc.ok("gnt-instance", "migrate", "--force", name)
        assert rows(vc, "pnode,status", name) == [[there, "running"]]
        after = fake_hv(vc, there).get_instance_state(name)["start_time"]
        assert (after != before) == (always == "true"), out


def test_disks_renamed_by_index_and_back_by_name(vc):
    # TestInstanceDeviceNames: rename by index, back by name; two disks of one name fail
    name = "rename-disks.example.com"
    _add(vc, name, "file", "--disk", "1:size=8M,name=second")
    for idx, orig in enumerate(["none", "second"]):
        vc.ok("gnt-instance", "modify", f"--disk={idx}:modify,name=renamed", name)
        vc.ok("gnt-instance", "modify", f"--disk=renamed:modify,name={orig}", name)
    assert rows(vc, "disk.names", name) == [["-,second"]]
    fail_unchanged(vc, "gnt-instance", "modify", "--disk=0:modify,name=same_name",
                   "--disk=1:modify,name=same_name", name, expect="already used")


def test_modify_sequence_of_ganetis_qa(vc):
    # TestInstanceModify on the fake hypervisor (tinyos takes no os-image parameter):
    # each change works, no change fails
    name = "modify.example.com"
    _add(vc, name)
    for args in (["-B", "minmem=128"], ["-B", "maxmem=128"], ["-B", "minmem=128,maxmem=128"],
                 ["-B", "vcpus=2"], ["-B", "vcpus=1"], ["-B", "vcpus=default"],
                 ["-B", "always_failover=true"], ["-B", "always_failover=default"]):
        vc.ok("gnt-instance", "modify", *args, name)
    fail_unchanged(vc, "gnt-instance", "modify", name, expect="No changes")


def test_new_primary_and_back(vc):
    # TestInstanceModifyPrimaryAndBack (file template): refused while running; after
    # the disk directory is copied by hand, the other node is the primary and back
    name = "newprimary.example.com"
    _add(vc, name)
    fail_unchanged(vc, "gnt-instance", "modify", f"--new-primary={N2}", name,
                   expect="still running")
    vc.ok("gnt-instance", "shutdown", name)
    (disk,) = disk_files(vc, N1, name)
    root1, root2 = vc.paths(N1).root, vc.paths(N2).root
    there = root2 + os.path.dirname(disk)[len(root1):]
    shutil.copytree(os.path.dirname(disk), there)
    vc.ok("gnt-instance", "modify", f"--new-primary={N2}", name)
    vc.ok("gnt-instance", "startup", name)
    assert rows(vc, "pnode,status", name) == [[N2, "running"]]
    assert fake_hv(vc, N2).get_instance_state(name) is not None
    vc.ok("gnt-instance", "shutdown", name)
    shutil.rmtree(there)
    vc.ok("gnt-instance", "modify", f"--new-primary={N1}", name)
    vc.ok("gnt-instance", "startup", name)
    assert rows(vc, "pnode,status", name) == [[N1, "running"]]


_BAD_IMAGE = "Parameter 'osparams': OS image must be an absolute path or a URL"


def test_os_image_must_be_an_absolute_path_or_a_url(vc):
    # TestInstanceModify sets os-image to a URL and back to default; TestInstanceReinstall
    # fails with a relative os-image ("NonExistantOsForQa"); add checks it as Ganeti's
    # (failing, as there: not an image of our store)
    install_os(vc, "imageos", {})
    for node in vc.names:
        with open(os.path.join(vc.paths(node).os_search_path[0], "imageos",
                               "parameters.list"), "w") as fh:
            fh.write("os-image the image to install\n")
    name = "osimage.example.com"
    fail_unchanged(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o",
                   "imageos", "-n", N1, *NOCHECK, "--no-start", "--no-install",
                   "--os-parameters", "os-image=NonExistantOsForQa", name,
                   expect="OS image NonExistantOsForQa is not in the image store")
    _add(vc, name, "file", "--no-start")
    vc.ok("gnt-instance", "modify", "-o", "imageos", name)
    url = "http://example.com/busybox.img"
    vc.ok("gnt-instance", "modify", "--os-parameters", "os-image=" + url, name)
    assert rows(vc, "osparams", name) == [[f"os-image={url}"]]
    vc.ok("gnt-instance", "modify", "--os-parameters", "os-image=default", name)
    assert "os-image" not in str(rows(vc, "osparams", name))
    vc.ok("gnt-instance", "modify", "--os-parameters", "os-image=/srv/images/a.img", name)
    # (a bare name is an image of our store: refused by add and reinstall when the
    # store has no such image, by modify always; doc/images.md)
    for verb, expect in ((("modify",), _BAD_IMAGE),
                         (("reinstall", "-f"), "is not in the image store")):
        fail_unchanged(vc, "gnt-instance", *verb, "--os-parameters",
                       "os-image=NonExistantOsForQa", name, expect=expect)
    assert rows(vc, "osparams", name) == [["os-image=/srv/images/a.img"]]


def _disk_paths(vc, name: str) -> list[str]:
    """The disk image paths of an instance, from gnt-instance info (shared ones too)."""
    import yaml
    (info,) = yaml.safe_load(vc.ok("gnt-instance", "info", name))
    paths = [disk["logical_id"][-1] for disk in info["Disks"]]
    return [p if os.path.exists(p) else vc.paths(N1).root + p for p in paths]


def test_convert_file_to_sharedfile_and_back(vc):
    # TestInstanceConvertDiskTemplate with file and sharedfile enabled: the stopped
    # instance goes to the other template and back, its data with it
    name = "convert.example.com"
    _add(vc, name, "file", "--disk", "1:size=4M", "--no-start")
    old = _disk_paths(vc, name)
    for path, text in zip(old, (b"first disk", b"second disk")):
        with open(path, "r+b") as fh:
            fh.seek(3 << 20)
            fh.write(text)
    vc.ok("gnt-instance", "modify", "-t", "sharedfile", name)
    assert rows(vc, "disk_template", name) == [["sharedfile"]]
    shared = _disk_paths(vc, name)
    assert not any(os.path.exists(p) for p in old)
    for path, text in zip(shared, (b"first disk", b"second disk")):
        assert path not in old and os.path.getsize(path) in (8 << 20, 4 << 20)
        with open(path, "rb") as fh:
            fh.seek(3 << 20)
            assert fh.read(len(text)) == text
    fail_unchanged(vc, "gnt-instance", "modify", "-t", "sharedfile", name,
                   expect="already has disk template")
    vc.ok("gnt-instance", "modify", "-t", "file", name)
    assert rows(vc, "disk_template", name) == [["file"]]
    assert _disk_paths(vc, name) == old and not any(os.path.exists(p) for p in shared)
    with open(old[1], "rb") as fh:
        fh.seek(3 << 20)
        assert fh.read(11) == b"second disk"
    vc.ok("gnt-instance", "startup", name)
    assert rows(vc, "status", name) == [["running"]]
