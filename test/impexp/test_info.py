"""config.ini of exports: what we write reads back, upstream's text reads as upstream means it."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.impexp import info as exportinfo
from ganeti.impexp.info import ExportDisk, ExportInfo, ExportNic


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


def test_the_image_checksum_is_written_and_read_back() -> None:
    info = _info()
    info.disks[0].sha256 = "ab" * 32
    text = exportinfo.build(info)
    assert f"disk0_sha256 = {'ab' * 32}" in text.splitlines()
    assert not any(line.startswith("disk1_sha256") for line in text.splitlines())
    assert [d.sha256 for d in exportinfo.parse(text).disks] == ["ab" * 32, None]


_DISK = "[export]\nversion = 0\n[instance]\nname = x\ndisk0_size = 4\n"


@pytest.mark.parametrize("dump", ["../OTHER/image", "/etc/passwd", "a/b", ".hidden", "..",
                                  "img\x01"],
                         ids=["dotdot", "absolute", "subdir", "hidden", "parent", "control"])
def test_an_image_name_outside_the_export_is_refused(dump: str) -> None:
    with pytest.raises(errors.ConfigurationError,
                       match=r"line 6, key disk0_dump in \[instance\]: the image name"
                       r".* is not a file name of the export's own directory"):
        exportinfo.parse(_DISK + f"disk0_dump = {dump}\n")


@pytest.mark.parametrize("sha", ["abc", "zz" * 32, "ab" * 33])
def test_a_malformed_checksum_is_refused(sha: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=r"line 6, key disk0_sha256 .*SHA-256"):
        exportinfo.parse(_DISK + f"disk0_sha256 = {sha}\n")


@pytest.mark.parametrize("text, message", [
    ("garbage\x1b[31m\xff\n[export]\n", "line 1 comes before any \\[section\\]"),
    ("[export]\nversion = 0\n[instance]\nname = x\n\x00\x07binary\xfe junk\n",
     "line 5 is not a 'key = value' line"),
    ("[export]\nversion = 0\n[instance]\nname = x\ndisk0_size = \x1b]0;pwn\x07\xe9" + "9" * 80
     + "\n", r"line 5, key disk0_size in \[instance\]: invalid size of disk 0 '\?\]0;pwn\?\?9"),
], ids=["before-section", "binary-line", "bad-size"])
def test_errors_name_the_line_and_never_echo_raw_bytes(text: str, message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message) as exc:
        exportinfo.parse(text)
    msg = str(exc.value)
    assert all(" " <= c <= "~" for c in msg), msg
    assert "junk" not in msg and len(msg) < 160


def test_excerpt_is_short_and_printable() -> None:
    assert exportinfo.excerpt("  plain  ") == "plain"
    assert exportinfo.excerpt("\x00\x01\xff") == ""
    assert exportinfo.excerpt("a\nb") == "a?b"
    assert exportinfo.excerpt("x" * 100) == "x" * 40 + "..."


@pytest.mark.parametrize("line, message", [
    ("disk_count = 2", r"line 6, key disk_count in \[instance\]: says 2, but 1 are described"),
    ("disk_count = \x07x", r"line 6, key disk_count in \[instance\]: invalid count '\?x'"),
    ("nic_count = 1", r"key nic_count in \[instance\]: says 1, but 0 are described"),
], ids=["disks", "garbage", "nics"])
def test_counts_must_match_what_is_described(line: str, message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message):
        exportinfo.parse(_DISK + line + "\n")


def test_firmware_state_travels_and_is_checked() -> None:
    plain = exportinfo.build(_info())
    assert "firmware_state" not in plain and exportinfo.parse(plain).firmware_state is None
    info = _info()
    info.firmware_state = "H4sIAAAAAAAAA+3OMQ6CQBCF4am9xV5h2QXW+xCswwAzsdKQYOXtZ"
    assert exportinfo.parse(exportinfo.build(info)).firmware_state == info.firmware_state
    bad = plain.replace("[hypervisor]", "firmware_state = not base64 !\n[hypervisor]", 1)
    with pytest.raises(errors.ConfigurationError, match="firmware_state"):
        exportinfo.parse(bad)
