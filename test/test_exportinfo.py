"""config.ini of exports: what we write reads back, upstream's text reads as upstream means it."""

from __future__ import annotations

import pytest

from ganeti import errors, exportinfo
from ganeti.exportinfo import ExportDisk, ExportInfo, ExportNic


def _info() -> ExportInfo:
    return ExportInfo(
        name="web1.example.com", os="tinyos+default", timestamp=1700000000, source="node1",
        disk_template="file", hypervisor="fake", tags=["a", "b"],
        disks=[ExportDisk(size=1024, dump="u1.disk0", ivname="disk/0", name="root"),
               ExportDisk(size=512, dump="u2.disk1", ivname="disk/1")],
        nics=[ExportNic(mac="aa:00:00:00:00:01", ip="192.0.2.1",
                        nicparams={"mode": "bridged", "link": "br0"})],
        hvparams={"migration_mode": "live"},
        beparams={"maxmem": 256, "minmem": 128, "vcpus": 2},
        osparams={"fill": "zero"}, osparams_private={"secret": "s3"})


def test_round_trip() -> None:
    info = exportinfo.parse(exportinfo.build(_info()))
    assert info.name == "web1.example.com" and info.os == "tinyos+default"
    assert (info.source, info.timestamp, info.compression) == ("node1", 1700000000, "none")
    assert (info.disk_template, info.hypervisor, info.tags) == ("file", "fake", ["a", "b"])
    assert [(d.size, d.dump, d.ivname, d.name) for d in info.disks] == [
        (1024, "u1.disk0", "disk/0", "root"), (512, "u2.disk1", "disk/1", None)]
    (nic,) = info.nics
    assert (nic.mac, nic.ip, nic.name, nic.network) == ("aa:00:00:00:00:01", "192.0.2.1",
                                                        None, None)
    assert nic.nicparams == {"mode": "bridged", "link": "br0"}
    assert info.beparams == {"maxmem": "256", "minmem": "128", "vcpus": "2"}
    assert info.hvparams == {"migration_mode": "live"}
    assert (info.osparams, info.osparams_private) == ({"fill": "zero"}, {"secret": "s3"})


def test_written_keys_are_upstreams() -> None:
    text = exportinfo.build(_info())
    for line in ("[export]", "version = 0", "compression = none", "[instance]", "memory = 256",
                 "nic0_vlan = None", "nic_count = 1", "disk1_dump = u2.disk1", "disk_count = 2",
                 "[hypervisor]", "[backend]", "[os]", "[os_private]", "tags = a b"):
        assert line in text.splitlines(), line


def test_old_export_keeps_backend_in_instance_section() -> None:
    info = exportinfo.parse("[export]\nversion = 0\nos = debootstrap\n"
                            "[instance]\nname = old1\nmemory = 512\nvcpus = 1\n"
                            "disk_template = plain\nnic0_mac = aa:00:00:00:00:02\n"
                            "nic0_ip = None\ndisk0_size = 2048\ndisk0_dump = old1.snap\n")
    assert info.beparams == {"maxmem": "512", "minmem": "512", "vcpus": "1"}
    assert [(n.mac, n.ip) for n in info.nics] == [("aa:00:00:00:00:02", None)]
    assert [(d.size, d.dump, d.name) for d in info.disks] == [(2048, "old1.snap", None)]


@pytest.mark.parametrize("text, message", [
    ("not an ini file", "not valid"),
    ("[instance]\nname = x\n", r"no \[export\] section"),
    ("[export]\nversion = 0\n", r"no \[instance\] section"),
    ("[export]\nversion = 0\n[instance]\ndisk_count = 0\n", "names no instance"),
    ("[export]\nversion = 1\n[instance]\nname = x\n", "wrong export version 1"),
    ("[export]\n[instance]\nname = x\ndisk0_size = big\n", "invalid size of disk 0"),
], ids=["not-ini", "no-export", "no-instance", "no-name", "version", "bad-size"])
def test_bad_exports_are_refused(text: str, message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message):
        exportinfo.parse(text)
