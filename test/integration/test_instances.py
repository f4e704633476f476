"""gnt-instance / gnt-os on a real 3-node virtual cluster: the lifecycle.

One cluster is shared by the module; tests run in file order and build on
each other (instances created early are used later).  Every state change
is checked through queries (``gnt-instance list -o ...``) and, where the
node side matters, through the files under the node roots.
"""

from __future__ import annotations

import os
import socket

import pytest
import yaml
from instance_helpers import (NOCHECK, disk_files, fail_unchanged, fake_hv, field,
                              read_marker, rows, status_of)
from vcluster_harness import VirtualCluster

from ganeti.utils import net as netutils

pytestmark = pytest.mark.timeout(240)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
FILE1 = "file1.example.com"
SHARED1 = "shared1.example.com"
DLESS1 = "dless1.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vci"), nodes=3) as cluster:
        yield cluster


def _hv_state_file(vc, node: str, name: str) -> str:
    return os.path.join(vc.paths(node).hypervisor_state_dir, name + ".json")


def test_file_storage_dir_is_node_local(vc):
    # recorded in canonical form by init, taken below each node's root
    assert "file storage path: /srv/ganeti/file-storage\n" in vc.ok("gnt-cluster", "info")


# --- add --------------------------------------------------------------------------

def test_add_file_instance_runs_tinyos_create(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-o", "tinyos",
          "-n", N1, "-B", "maxmem=256,minmem=192,vcpus=2", "-O", "hostname_prefix=web-",
          "--net", "0:mac=aa:00:00:00:01:01,ip=192.0.2.10,link=br7", *NOCHECK, FILE1)
    (row,) = rows(vc, "name,status,pnode,os,disk_template,be/maxmem,be/minmem,be/vcpus,"
                  "nic.macs,nic.ips,nic.links,disk.sizes", FILE1)
    assert row == [FILE1, "running", N1, "tinyos", "file", "256", "192", "2",
                   "aa:00:00:00:01:01", "192.0.2.10", "br7", "16"]
    (disk,) = disk_files(vc, N1, FILE1)
    assert os.path.getsize(disk) == 16 << 20
    marker = read_marker(disk)
    assert f"name={FILE1}" in marker and f"hostname=web-{FILE1}" in marker
    with open(disk, "rb") as fh:
        assert fh.read(11) == b"TINYOS-BOOT"
    assert os.path.exists(_hv_state_file(vc, N1, FILE1))
    # no copy of the disk below another node's root
    assert disk_files(vc, N2, FILE1) == [] and disk_files(vc, N3, FILE1) == []


def test_add_sharedfile_with_variant_and_hvparams(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=8M",
          "-o", "tinyos+minimal", "-n", N2, "-H", "fake:migration_mode=non-live", *NOCHECK,
          SHARED1)
    (row,) = rows(vc, "status,pnode,os,hv/migration_mode,disk_template", SHARED1)
    assert row == ["running", N2, "tinyos+minimal", "non-live", "sharedfile"]
    assert os.path.exists(_hv_state_file(vc, N2, SHARED1))
    (info,) = yaml.safe_load(vc.ok("gnt-instance", "info", SHARED1))
    (path,) = [disk["logical_id"][-1] for disk in info["Disks"]]
    assert os.path.getsize(path) == 8 << 20
    assert "variant=minimal" in read_marker(path)


def test_add_diskless_no_start(vc):
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start", "-n", N3,
          *NOCHECK, DLESS1)
    assert rows(vc, "status,pnode,disk_template,disk.count", DLESS1) == \
        [["ADMIN_down", N3, "diskless", "0"]]
    assert not os.path.exists(_hv_state_file(vc, N3, DLESS1))


# --- queries ----------------------------------------------------------------------

def test_list_default_columns_and_filter(vc):
    out = vc.ok("gnt-instance", "list")
    header, *lines = out.splitlines()
    assert header.split() == ["Instance", "Hypervisor", "OS", "Primary_node", "Status", "Memory"]
    assert sorted(line.split()[0] for line in lines) == sorted([FILE1, SHARED1, DLESS1])
    assert rows(vc, "name", filt=f'pnode == "{N2}"') == [[SHARED1]]
    assert rows(vc, "name", filt='admin_state == "down"') == [[DLESS1]]
    assert [r[0] for r in rows(vc, "name", filt='disk_template == "file" or disk_template == "sharedfile"')] \
        == sorted([FILE1, SHARED1])


def test_list_unknown_instance_and_field(vc):
    res = vc.run("gnt-instance", "list", "nosuch.example.com")
    assert res.returncode != 0 and "nosuch.example.com" in res.stdout + res.stderr
    assert "unknown_entity" in res.stderr
    for argv in (("gnt-node", "list", "nosuch.vcluster"), ("gnt-node", "info", "nosuch.vcluster"),
                 ("gnt-instance", "info", "nosuch.example.com"),
                 ("gnt-os", "info", "nosuchos")):
        res = vc.run(*argv)
        assert res.returncode != 0 and "unknown_entity" in res.stderr, (argv, res.stderr)
    res = vc.run("gnt-instance", "list", "-o", "name,nosuchfield")
    assert res.returncode == 14 and "unknown fields nosuchfield" in res.stderr


def test_list_fields_and_info(vc):
    out = vc.ok("gnt-instance", "list-fields", "--no-headers", "--separator=|")
    names = {line.split("|")[0] for line in out.splitlines()}
    assert {"name", "status", "pnode", "oper_ram", "disk.sizes", "be/maxmem"} <= names
    info = vc.ok("gnt-instance", "info", FILE1)
    assert f"Instance name: {FILE1}" in info and f"primary: {N1}" in info
    assert "actual state is up" in info and "maxmem: 256" in info
    assert "MAC: aa:00:00:00:01:01" in info and "disk/0: file, size 16M" in info


def test_gnt_os_list_diagnose_info(vc):
    assert set(vc.ok("gnt-os", "list", "--no-headers").split()) >= \
        {"tinyos+default", "tinyos+minimal"}
    diag = vc.ok("gnt-os", "diagnose")
    assert "tinyos" in diag and diag.count("status: valid") >= 3
    info = vc.ok("gnt-os", "info")
    assert "tinyos" in info and "hostname_prefix" in info


# --- start / stop / reboot ----------------------------------------------------------

def test_shutdown_and_startup(vc):
    vc.ok("gnt-instance", "shutdown", FILE1)
    assert rows(vc, "status,admin_state", FILE1) == [["ADMIN_down", "down"]]
    assert not os.path.exists(_hv_state_file(vc, N1, FILE1))
    vc.ok("gnt-instance", "startup", FILE1)
    assert rows(vc, "status,admin_state", FILE1) == [["running", "up"]]
    assert os.path.exists(_hv_state_file(vc, N1, FILE1))


def test_startup_no_remember_keeps_admin_state(vc):
    vc.ok("gnt-instance", "startup", "--no-remember", DLESS1)
    assert rows(vc, "status,admin_state", DLESS1) == [["ERROR_up", "down"]]
    vc.ok("gnt-instance", "shutdown", "--no-remember", DLESS1)
    assert rows(vc, "status,admin_state", DLESS1) == [["ADMIN_down", "down"]]
    vc.ok("gnt-instance", "shutdown", "--no-remember", FILE1)
    assert rows(vc, "status,admin_state", FILE1) == [["ERROR_down", "up"]]
    vc.ok("gnt-instance", "startup", FILE1)
    assert status_of(vc, FILE1) == "running"


def test_startup_shutdown_all_and_by_node(vc):
    vc.ok("gnt-instance", "shutdown", "--all", "--force")
    assert {r[0] for r in rows(vc, "status")} == {"ADMIN_down"}
    vc.ok("gnt-instance", "startup", "--node", "--force", N2)
    assert rows(vc, "name,status", filt='status == "running"') == [[SHARED1, "running"]]
    vc.ok("gnt-instance", "startup", "--primary", "--force", N1, N3)
    assert {r[0] for r in rows(vc, "status")} == {"running"}
    assert os.path.exists(_hv_state_file(vc, N3, DLESS1))


@pytest.mark.parametrize("rtype", ["soft", "hard", "full"])
def test_reboot_types(vc, rtype):
    before = fake_hv(vc, N1).get_instance_state(FILE1)
    assert before is not None
    vc.ok("gnt-instance", "reboot", "--type", rtype, FILE1)
    after = fake_hv(vc, N1).get_instance_state(FILE1)
    assert after is not None and status_of(vc, FILE1) == "running"
    assert after["start_time"] >= before["start_time"]
    assert after["start_time"] != before["start_time"]


# --- failover / migrate / move ------------------------------------------------------

def test_migrate_sharedfile_moves_state_between_roots(vc):
    vc.ok("gnt-instance", "migrate", "-f", "-n", N3, SHARED1)
    assert rows(vc, "status,pnode", SHARED1) == [["running", N3]]
    assert os.path.exists(_hv_state_file(vc, N3, SHARED1))
    assert not os.path.exists(_hv_state_file(vc, N2, SHARED1))


def test_failover_sharedfile(vc):
    vc.ok("gnt-instance", "failover", "-f", "-n", N2, SHARED1)
    assert rows(vc, "status,pnode", SHARED1) == [["running", N2]]
    assert os.path.exists(_hv_state_file(vc, N2, SHARED1))
    assert not os.path.exists(_hv_state_file(vc, N3, SHARED1))


def test_move_file_instance_copies_disk(vc):
    (old_disk,) = disk_files(vc, N1, FILE1)
    with open(old_disk, "rb") as fh:
        data = fh.read()
    vc.ok("gnt-instance", "move", "-f", "-n", N2, FILE1)
    assert rows(vc, "status,pnode", FILE1) == [["running", N2]]
    (new_disk,) = disk_files(vc, N2, FILE1)
    with open(new_disk, "rb") as fh:
        assert fh.read() == data
    assert disk_files(vc, N1, FILE1) == [] and not os.path.exists(old_disk)
    assert os.path.exists(_hv_state_file(vc, N2, FILE1))
    assert not os.path.exists(_hv_state_file(vc, N1, FILE1))


def test_migrate_file_instance_refused(vc):
    fail_unchanged(vc, "gnt-instance", "migrate", "-f", "-n", N3, FILE1)


# --- modify / grow / disks ------------------------------------------------------------

def test_modify_beparams_disk_and_nic(vc):
    vc.ok("gnt-instance", "modify", "-B", "maxmem=512,minmem=512", FILE1)
    assert rows(vc, "be/maxmem,be/minmem", FILE1) == [["512", "512"]]
    vc.ok("gnt-instance", "modify", "--net", "add:mac=aa:00:00:00:02:02,link=br9", FILE1)
    assert rows(vc, "nic.count,nic.macs", FILE1) == \
        [["2", "aa:00:00:00:01:01,aa:00:00:00:02:02"]]
    vc.ok("gnt-instance", "shutdown", FILE1)
    vc.ok("gnt-instance", "modify", "--disk", "add:size=4M", FILE1)
    assert rows(vc, "disk.count,disk.sizes", FILE1) == [["2", "16,4"]]
    disks = disk_files(vc, N2, FILE1)
    assert len(disks) == 2 and sorted(os.path.getsize(d) for d in disks) == [4 << 20, 16 << 20]
    vc.ok("gnt-instance", "modify", "--disk", "remove", FILE1)
    assert rows(vc, "disk.count,disk.sizes", FILE1) == [["1", "16"]]
    (disk,) = disk_files(vc, N2, FILE1)
    assert os.path.getsize(disk) == 16 << 20


def test_modify_hvparams(vc):
    vc.ok("gnt-instance", "modify", "-H", "migration_mode=live", SHARED1)
    assert rows(vc, "hv/migration_mode,custom_hvparams,status", SHARED1) == \
        [["live", "migration_mode=live", "running"]]
    assert "migration_mode: live" in vc.ok("gnt-instance", "info", SHARED1)
    fail_unchanged(vc, "gnt-instance", "modify", "-H", "nosuchhvparam=1", SHARED1,
                   expect="nosuchhvparam")
    fail_unchanged(vc, "gnt-instance", "modify", "-H", "migration_mode=sideways", SHARED1,
                   expect="migration_mode")


def test_modify_osparams(vc):
    vc.ok("gnt-instance", "modify", "-O", "hostname_prefix=db-", FILE1)
    assert field(vc, FILE1, "custom_osparams") == "hostname_prefix=db-"
    effective = field(vc, FILE1, "osparams")
    assert "hostname_prefix=db-" in effective.split(", ") and "{" not in effective
    fail_unchanged(vc, "gnt-instance", "modify", "-O", "fill=bogus", FILE1, expect="fill")
    assert field(vc, FILE1, "custom_osparams") == "hostname_prefix=db-"


def test_modify_nic_modify_and_remove(vc):
    vc.ok("gnt-instance", "modify", "--net", "1:modify,mac=AA:00:00:00:03:03,ip=192.0.2.30",
          FILE1)
    assert rows(vc, "nic.count,nic.macs,nic.ips,nic.links", FILE1) == \
        [["2", "aa:00:00:00:01:01,aa:00:00:00:03:03", "192.0.2.10,192.0.2.30", "br7,br9"]]
    vc.ok("gnt-instance", "modify", "--net", "0:ip=none,link=br8", FILE1)
    assert rows(vc, "nic.ips,nic.links", FILE1) == [["-,192.0.2.30", "br8,br9"]]
    other_mac = field(vc, SHARED1, "nic.macs")
    for net, expect in (("1:modify,mac=zz:00:00", "mac"), ("5:modify,ip=192.0.2.5", "index"),
                        (f"0:modify,mac={other_mac}", "in use"),
                        ("0:modify,ip=not-an-ip", "ip"), ("2:remove", "index")):
        fail_unchanged(vc, "gnt-instance", "modify", "--net", net, FILE1, expect=expect)
    vc.ok("gnt-instance", "modify", "--net", "0:remove", FILE1)
    assert rows(vc, "nic.count,nic.macs,nic.ips,nic.links", FILE1) == \
        [["1", "aa:00:00:00:03:03", "192.0.2.30", "br9"]]
    assert "MAC: aa:00:00:00:01:01" not in vc.ok("gnt-instance", "info", FILE1)


def test_modify_disk_mode_and_name(vc):
    vc.ok("gnt-instance", "modify", "--disk", "0:modify,mode=ro,name=root", FILE1)
    assert rows(vc, "disk.modes,disk.mode/0,disk.names,disk.sizes", FILE1) == \
        [["ro", "ro", "root", "16"]]
    for disk, expect in (("3:modify,mode=ro", "index"), ("0:mode=rx", "mode"),
                         ("0:size=1G", "grow-disk")):
        fail_unchanged(vc, "gnt-instance", "modify", "--disk", disk, FILE1, expect=expect)
    vc.ok("gnt-instance", "modify", "--disk", "0:mode=rw", FILE1)
    assert rows(vc, "disk.modes,disk.names", FILE1) == [["rw", "root"]]


def test_add_without_name_and_ip_check(vc):
    name = "nocheck.example.com"
    fail_unchanged(vc, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start",
                   "-n", N1, "--no-name-check", name, expect="name check")
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start", "-n", N1,
          "--no-name-check", "--no-ip-check", name)
    assert rows(vc, "name,status,pnode,os", name) == [[name, "ADMIN_down", N1, "tinyos"]]
    vc.ok("gnt-instance", "remove", "-f", name)
    assert name not in {r[0] for r in rows(vc, "name")}


def test_add_with_name_check_takes_the_resolved_name(vc):
    # "localhost" resolves through the system resolver (127.0.0.1); NIC
    # ip=auto takes that address
    fqdn, ip = netutils.resolve_hostname("localhost")   # what the master will see
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start", "-n", N1,
          "--no-ip-check", "--net", "0:ip=auto", "localhost")
    assert rows(vc, "name,status,pnode,nic.ips", fqdn) == [[fqdn, "ADMIN_down", N1, ip]]
    vc.ok("gnt-instance", "remove", "-f", fqdn)
    assert fqdn not in {r[0] for r in rows(vc, "name")}


def test_add_unresolvable_name_refused(vc):
    try:
        socket.gethostbyname_ex("nosuch.invalid")
    except OSError:
        pass
    else:   # a resolv.conf search domain with a wildcard record answers for it
        pytest.skip("this machine's resolver answers for nosuch.invalid")
    out = fail_unchanged(vc, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos",
                         "--no-start", "-n", N1, "nosuch.invalid",
                         expect="Cannot resolve instance name nosuch.invalid")
    assert "--no-name-check" in out and "resolver_error" in out


def test_add_with_ip_in_use_refused(vc):
    # nothing listens on 127.0.0.1 at the node daemon port: the refusal
    # means a live host owns the address
    fqdn, ip = netutils.resolve_hostname("localhost")
    out = fail_unchanged(vc, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos",
                         "--no-start", "-n", N1, "localhost",
                         expect=f"IP address {ip} of instance {fqdn} already in use")
    assert "--no-ip-check" in out and "resource_not_unique" in out


def test_grow_disk(vc):
    vc.ok("gnt-instance", "grow-disk", FILE1, "0", "8M")
    assert field(vc, FILE1, "disk.sizes") == "24"
    (disk,) = disk_files(vc, N2, FILE1)
    assert os.path.getsize(disk) == 24 << 20


def test_activate_and_deactivate_disks(vc):
    out = vc.ok("gnt-instance", "activate-disks", FILE1)
    (disk,) = disk_files(vc, N2, FILE1)
    # "node:disk/0:<canonical path of the disk link>"
    node, iv_name, link = out.strip().split(":", 2)
    assert (node, iv_name) == (N2, "disk/0")
    assert os.path.realpath(os.path.join(vc.paths(N2).root, link.lstrip("/"))) == disk
    vc.ok("gnt-instance", "deactivate-disks", FILE1)
    assert os.path.exists(disk)


def test_reinstall_with_other_variant(vc):
    vc.ok("gnt-instance", "reinstall", "-f", "-o", "tinyos+minimal", FILE1)
    assert field(vc, FILE1, "os") == "tinyos+minimal"
    (disk,) = disk_files(vc, N2, FILE1)
    assert "variant=minimal" in read_marker(disk)


def test_rename_moves_disk_directory(vc):
    new = "file2.example.com"
    vc.ok("gnt-instance", "rename", *NOCHECK, FILE1, new)
    assert rows(vc, "name,pnode", new) == [[new, N2]]
    assert disk_files(vc, N2, FILE1) == []
    (disk,) = disk_files(vc, N2, new)
    assert os.path.getsize(disk) == 24 << 20
    vc.ok("gnt-instance", "rename", *NOCHECK, new, FILE1)
    assert len(disk_files(vc, N2, FILE1)) == 1


def test_offline_and_online(vc):
    vc.ok("gnt-instance", "modify", "--offline", FILE1)
    assert rows(vc, "status,admin_state", FILE1) == [["ADMIN_offline", "offline"]]
    fail_unchanged(vc, "gnt-instance", "startup", FILE1, expect="offline")
    vc.ok("gnt-instance", "modify", "--online", FILE1)
    assert status_of(vc, FILE1) == "ADMIN_down"
    vc.ok("gnt-instance", "startup", FILE1)
    assert status_of(vc, FILE1) == "running"


def test_console(vc):
    out = vc.ok("gnt-instance", "console", FILE1)
    # the fake hypervisor has no console: the message says where the instance runs
    assert FILE1 in out and N2 in out and "fake" in out
    fail_unchanged(vc, "gnt-instance", "console", DLESS1 + ".nosuch", expect="not known")


# --- tags -------------------------------------------------------------------------------

def test_tags_instance_node_cluster_and_search(vc):
    vc.ok("gnt-instance", "add-tags", FILE1, "web", "prod")
    vc.ok("gnt-node", "add-tags", N3, "rack:b2")
    vc.ok("gnt-cluster", "add-tags", "owner:ops")
    assert set(vc.ok("gnt-instance", "list-tags", FILE1).split()) == {"web", "prod"}
    assert vc.ok("gnt-node", "list-tags", N3).split() == ["rack:b2"]
    assert vc.ok("gnt-cluster", "list-tags").split() == ["owner:ops"]
    assert set(field(vc, FILE1, "tags").split(",")) == {"web", "prod"}
    found = vc.ok("gnt-cluster", "search-tags", "^(prod|rack)")
    assert f"/instances/{FILE1} prod" in found and f"/nodes/{N3} rack:b2" in found
    vc.ok("gnt-instance", "remove-tags", FILE1, "prod")
    assert vc.ok("gnt-instance", "list-tags", FILE1).split() == ["web"]
    vc.ok("gnt-node", "remove-tags", N3, "rack:b2")
    vc.ok("gnt-cluster", "remove-tags", "owner:ops")
    assert vc.ok("gnt-cluster", "list-tags").strip() == ""


# --- bad input: clear error, nothing changed -----------------------------------------------

BAD_INPUT = [
    (["add", "-t", "file", "--disk", "0:size=8M", "-o", "nosuchos", "-n", N1, *NOCHECK,
      "bad1.example.com"], "nosuchos"),
    (["add", "-t", "file", "--disk", "0:size=0", "-o", "tinyos", "-n", N1, *NOCHECK,
      "bad2.example.com"], "size"),
    (["add", "-t", "diskless", "-o", "tinyos", "-B", "maxmem=lots", "-n", N1, *NOCHECK,
      "bad3.example.com"], "maxmem"),
    (["add", "-t", "diskless", "-o", "tinyos", "-B", "nosuchparam=1", "-n", N1, *NOCHECK,
      "bad4.example.com"], "nosuchparam"),
    (["add", "-t", "diskless", "-o", "tinyos", "-n", N1, *NOCHECK, DLESS1], "exists"),
    (["add", "-t", "diskless", "-o", "tinyos", "-n", "nosuchnode", *NOCHECK,
      "bad5.example.com"], "nosuchnode"),
    (["add", "-t", "diskless", "-o", "tinyos", "-O", "fill=bogus", "-n", N1, *NOCHECK,
      "bad6.example.com"], "fill"),
    (["add", "-t", "diskless", "-o", "tinyos", "-n", N1, "--net", "0:ip=auto",
      *NOCHECK, "bad8.example.com"], "ip=auto"),
    (["startup", "nosuch.example.com"], "nosuch.example.com"),
    (["modify", "-B", "vcpus=-3", DLESS1], "vcpus"),
    (["grow-disk", FILE1, "0", "0"], ""),
    (["rename", *NOCHECK, FILE1, DLESS1], "exists"),
    (["reinstall", "-f", "-o", "tinyos", FILE1], "stop it"),
    (["migrate", "-f", "nosuch.example.com"], "nosuch.example.com"),
    (["move", "-f", "-n", N2, FILE1], ""),
]


@pytest.mark.parametrize("argv,expect", BAD_INPUT, ids=[" ".join(a[:2]) + f"-{i}"
                                                         for i, (a, _e) in enumerate(BAD_INPUT)])
def test_bad_input_changes_nothing(vc, argv, expect):
    fail_unchanged(vc, "gnt-instance", *argv, expect=expect)


def test_reinstall_unknown_os_refused(vc):
    vc.ok("gnt-instance", "shutdown", DLESS1)
    fail_unchanged(vc, "gnt-instance", "reinstall", "-f", "-o", "nosuchos", DLESS1,
                   expect="nosuchos")
    vc.ok("gnt-instance", "startup", DLESS1)
    assert status_of(vc, DLESS1) == "running"


def test_offline_node_refused(vc):
    vc.ok("gnt-node", "modify", "--offline", "yes", N3)
    try:
        assert status_of(vc, DLESS1) == "ERROR_nodeoffline"
        fail_unchanged(vc, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos",
                       "-n", N3, *NOCHECK, "bad7.example.com", expect="offline")
        fail_unchanged(vc, "gnt-instance", "migrate", "-f", "-n", N3, SHARED1,
                       expect="offline")
    finally:
        vc.ok("gnt-node", "modify", "--offline", "no", "--force", N3)
    assert status_of(vc, DLESS1) == "running"


# --- remove --------------------------------------------------------------------------------

def test_remove_deletes_disks_and_state(vc):
    vc.ok("gnt-instance", "remove", "-f", FILE1)
    assert FILE1 not in {r[0] for r in rows(vc, "name")}
    assert disk_files(vc, N2, FILE1) == []
    assert not os.path.exists(_hv_state_file(vc, N2, FILE1))
    res = vc.run("gnt-instance", "info", FILE1)
    assert res.returncode != 0 and "not known" in res.stdout + res.stderr
