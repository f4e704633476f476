"""Tests for ganeti.osapi and the shipped tinyos definition."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat

import pytest

from ganeti import errors, osapi, pathutils

TINYOS = pathlib.Path(__file__).resolve().parent.parent / "tools" / "os" / "tinyos"
MIB = 1024 * 1024


def install_os(paths: pathutils.Paths, src: pathlib.Path, name: str) -> pathlib.Path:
    """Copy an OS dir into the first search dir and make its scripts executable."""
    dest = pathlib.Path(paths.os_search_path[0]) / name
    shutil.copytree(src, dest)
    for script in ("create", "import", "export", "rename", "verify"):
        p = dest / script
        if p.exists():
            p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return dest


def make_os(paths: pathutils.Paths, name: str, *, api: str = "20\n", create: str = "exit 0",
            variants: str | None = None, params: str | None = "",
            skip: tuple[str, ...] = ()) -> pathlib.Path:
    d = pathlib.Path(paths.os_search_path[0]) / name
    d.mkdir(parents=True)
    if api is not None:
        (d / "ganeti_api_version").write_text(api)
    for script in ("create", "import", "export", "rename", "verify"):
        if script in skip:
            continue
        body = create if script == "create" else "exit 0"
        (d / script).write_text(f"#!/bin/sh\n{body}\n")
        (d / script).chmod(0o755)
    if variants is not None:
        (d / "variants.list").write_text(variants)
    if params is not None:
        (d / "parameters.list").write_text(params)
    return d


@pytest.fixture
def paths(tmp_path) -> pathutils.Paths:
    return pathutils.Paths(root=str(tmp_path / "node1"))


@pytest.fixture
def tinyos(paths) -> pathlib.Path:
    return install_os(paths, TINYOS, "tinyos")


def file_disk(tmp_path, size_mib: int = 2, name: str = "disk0") -> osapi.OSDisk:
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(size_mib * MIB)
    return osapi.OSDisk(path=str(path), size=size_mib, uuid=f"uuid-{name}",
                        backend_type="file:loop")


def instance(disks=(), os_name="tinyos+default", name="inst1.example.com", **kw) -> osapi.OSInstance:
    return osapi.OSInstance(name=name, os=os_name, uuid="i-uuid", disks=tuple(disks), **kw)


def read_marker(path: str) -> str:
    with open(path, "rb") as fh:
        fh.seek(4096)
        return fh.read(512).rstrip(b"\0").decode()


# --- finding and diagnosing --------------------------------------------------

def test_split_os_name():
    assert osapi.split_os_name("debian+minimal") == ("debian", "minimal")
    assert osapi.split_os_name("debian") == ("debian", None)


def test_find_tinyos(paths, tinyos):
    osd = osapi.find_os(paths, "tinyos+minimal")
    assert osd.name == "tinyos"
    assert osd.api_version == 20
    assert osd.variants == ("default", "minimal", "compact")
    assert osd.parameter_names == ["hostname_prefix", "fill"]


def test_find_os_missing(paths):
    with pytest.raises(errors.InvalidOS, match="not found"):
        osapi.find_os(paths, "nosuchos")


def test_highest_common_api_version(paths):
    make_os(paths, "multi", api="10\n15\n99\n", params=None)
    assert osapi.find_os(paths, "multi").api_version == 15


def test_diagnose(paths):
    make_os(paths, "good")
    make_os(paths, "noapi", api=None)
    make_os(paths, "badver", api="5\n")
    make_os(paths, "notnum", api="twenty\n")
    d = make_os(paths, "noexec")
    (d / "import").chmod(0o644)
    make_os(paths, "noscript", skip=("rename",))
    make_os(paths, "noparams", params=None)
    make_os(paths, "emptyvariants", variants="")
    make_os(paths, "commentedvariants", variants="# the variants\n\nv1\n#v2\n")
    result = {r.name: r for r in osapi.diagnose_os(paths)}
    assert result["good"].valid and result["good"].status == ""
    # an empty variants.list: no variants (upstream's rule), comment lines skipped
    assert result["emptyvariants"].valid and result["emptyvariants"].variants == ()
    assert result["commentedvariants"].variants == ("v1",)
    expected = {"noapi": "missing API version file", "badver": "API version mismatch",
                "notnum": "non-numbers", "noexec": "'import' is not executable",
                "noscript": "'rename' is missing", "noparams": "missing parameters.list"}
    for name, reason in expected.items():
        assert not result[name].valid, name
        assert reason in result[name].status, (name, result[name].status)


def test_api10_needs_no_verify_or_params(paths):
    make_os(paths, "old", api="10\n", skip=("verify",), params=None)
    osd = osapi.find_os(paths, "old")
    assert osd.api_version == 10
    assert "verify" not in osd.scripts


def test_first_search_dir_wins(paths):
    make_os(paths, "dup")
    second = pathlib.Path(paths.os_search_path[1]) / "dup"
    second.mkdir(parents=True)
    assert osapi.find_os(paths, "dup").path == os.path.join(paths.os_search_path[0], "dup")
    assert [r.valid for r in osapi.diagnose_os(paths) if r.name == "dup"] == [True, False]


# --- variants and environment -----------------------------------------------

def test_variants(paths, tinyos):
    osd = osapi.find_os(paths, "tinyos")
    assert osapi.select_variant(osd, None) == "default"
    assert osapi.select_variant(osd, "minimal") == "minimal"
    with pytest.raises(errors.InvalidOS, match="Unsupported variant"):
        osapi.select_variant(osd, "huge")
    make_os(paths, "plain")
    with pytest.raises(errors.InvalidOS, match="does not support variants"):
        osapi.select_variant(osapi.find_os(paths, "plain"), "x")


def test_build_env(paths, tinyos, tmp_path):
    osd = osapi.find_os(paths, "tinyos")
    inst = instance(
        disks=[file_disk(tmp_path), osapi.OSDisk(path="/dev/xvdb", size=10, uuid="u2",
                                                 name="data", uri="rbd:pool/x",
                                                 access="ro")],
        nics=(osapi.OSNic(mac="aa:00:00:00:00:01", ip="192.0.2.10", link="br0", uuid="n0",
                          name="eth0"),
              osapi.OSNic(mac="aa:00:00:00:00:02", mode="routed", link="rt1", uuid="n1")),
        osparams={"hostname_prefix": "vm-"}, hvparams={"migration_mode": "live"},
        beparams={"maxmem": 512, "auto_balance": True}, os_name="tinyos+minimal")
    env = osapi.build_os_env(osd, inst, debug_level=2)
    expected = {
        "OS_API_VERSION": "20", "OS_NAME": "tinyos", "OS_VARIANT": "minimal",
        "INSTANCE_NAME": "inst1.example.com", "INSTANCE_OS": "tinyos+minimal",
        "HYPERVISOR": "fake", "DEBUG_LEVEL": "2", "DISK_COUNT": "2",
        "DISK_0_PATH": str(tmp_path / "disk0"), "DISK_0_SIZE": "2", "DISK_0_ACCESS": "rw",
        "DISK_0_BACKEND_TYPE": "file:loop", "DISK_0_UUID": "uuid-disk0",
        "DISK_1_URI": "rbd:pool/x", "DISK_1_NAME": "data", "DISK_1_ACCESS": "ro",
        "NIC_COUNT": "2", "NIC_0_MAC": "aa:00:00:00:00:01", "NIC_0_IP": "192.0.2.10",
        "NIC_0_MODE": "bridged", "NIC_0_LINK": "br0", "NIC_0_BRIDGE": "br0",
        "NIC_0_UUID": "n0", "NIC_0_NAME": "eth0", "NIC_1_MODE": "routed",
        "OSP_HOSTNAME_PREFIX": "vm-", "INSTANCE_HV_migration_mode": "live",
        "INSTANCE_BE_maxmem": "512", "INSTANCE_BE_auto_balance": "True",
    }
    for key, value in expected.items():
        assert env.get(key) == value, key
    assert "NIC_1_BRIDGE" not in env and "NIC_1_IP" not in env
    assert "DISK_0_URI" not in env


def test_build_env_refuses_unknown_variant(paths, tinyos):
    osd = osapi.find_os(paths, "tinyos")
    with pytest.raises(errors.InvalidOS, match="huge"):
        osapi.build_os_env(osd, instance(os_name="tinyos+huge"))


# --- running scripts (tinyos) -----------------------------------------------

def test_tinyos_create_writes_image(paths, tinyos, tmp_path):
    disk = file_disk(tmp_path)
    log = osapi.create_os(paths, instance([disk], osparams={"hostname_prefix": "vm-"}),
                          timeout=30)
    data = open(disk.path, "rb").read()
    assert len(data) == 2 * MIB  # not truncated
    assert data[:11] == b"TINYOS-BOOT"
    assert data[510:512] == b"\x55\xaa"
    assert data[1080:1082] == b"\x53\xef"
    marker = read_marker(disk.path)
    assert "name=inst1.example.com" in marker
    assert "hostname=vm-inst1.example.com" in marker
    assert os.path.basename(log).startswith("add-tinyos-inst1.example.com-")
    assert os.path.dirname(log) == paths.os_log_dir
    text = open(log).read()
    assert "installing inst1.example.com" in text
    assert "OSP_HOSTNAME_PREFIX=<hidden>" in text and "DISK_0_SIZE=2" in text


def test_tinyos_minimal_variant_has_no_ext_magic(paths, tinyos, tmp_path):
    disk = file_disk(tmp_path)
    osapi.create_os(paths, instance([disk], os_name="tinyos+minimal"), timeout=30)
    data = open(disk.path, "rb").read(4096)
    assert data[510:512] == b"\x55\xaa" and data[1080:1082] == b"\0\0"
    assert "variant=minimal" in read_marker(disk.path)


def test_tinyos_create_diskless(paths, tinyos):
    log = osapi.create_os(paths, instance([]), timeout=30)
    assert "no disks" in open(log).read()


def test_tinyos_rename_updates_marker(paths, tinyos, tmp_path):
    disk = file_disk(tmp_path)
    osapi.create_os(paths, instance([disk], name="a-very-long-old-name.example.com"), timeout=30)
    log = osapi.rename_os(paths, instance([disk], name="new.example.com"),
                          "a-very-long-old-name.example.com", timeout=30)
    marker = read_marker(disk.path)
    assert "name=new.example.com" in marker
    assert "old-name" not in marker
    assert os.path.basename(log).startswith("rename-tinyos-new.example.com-")


def test_tinyos_rename_refuses_blank_disk(paths, tinyos, tmp_path):
    disk = file_disk(tmp_path)
    with pytest.raises(errors.OpExecError, match="no tinyos image"):
        osapi.rename_os(paths, instance([disk]), "old", timeout=30)


def test_tinyos_export_import_round_trip(paths, tinyos, tmp_path):
    src = file_disk(tmp_path, name="src")
    dst = file_disk(tmp_path, name="dst")
    osapi.create_os(paths, instance([src]), timeout=30)
    with open(src.path, "r+b") as fh:
        fh.seek(MIB + 5)
        fh.write(os.urandom(1000))
    dump = str(tmp_path / "dump.img")
    osapi.export_os_disk(paths, instance([src]), 0, dump, timeout=30)
    assert open(dump, "rb").read() == open(src.path, "rb").read()
    osapi.import_os_disk(paths, instance([dst]), 0, dump, timeout=30)
    assert open(dst.path, "rb").read() == open(src.path, "rb").read()


def test_export_bad_index(paths, tinyos, tmp_path):
    with pytest.raises(errors.OpExecError, match="no disk 3"):
        osapi.export_os_disk(paths, instance([file_disk(tmp_path)]), 3, str(tmp_path / "x"))


def test_verify_params(paths, tinyos):
    osapi.verify_os_params(paths, "tinyos", {"fill": "zero", "hostname_prefix": "web-"})
    # a silent successful verify (run on every instance add) leaves no log file
    assert not os.path.isdir(paths.os_log_dir) or os.listdir(paths.os_log_dir) == []
    with pytest.raises(errors.ParameterError, match="Unknown parameters.*colour"):
        osapi.verify_os_params(paths, "tinyos", {"colour": "red"})
    with pytest.raises(errors.ParameterError, match="invalid value 'lots' for parameter fill"):
        osapi.verify_os_params(paths, "tinyos", {"fill": "lots"})
    # a refusal is logged, with the script's output
    (log,) = os.listdir(paths.os_log_dir)
    assert log.startswith("verify-tinyos-params-")
    with open(os.path.join(paths.os_log_dir, log), encoding="utf-8") as fh:
        assert "invalid value 'lots' for parameter fill" in fh.read()


def test_verify_with_output_is_logged_even_on_success(paths):
    osdir = make_os(paths, "chatty")
    (osdir / "verify").write_text('#!/bin/sh\necho "checked $*"\n')
    osapi.verify_os_params(paths, "chatty", {})
    (log,) = os.listdir(paths.os_log_dir)
    with open(os.path.join(paths.os_log_dir, log), encoding="utf-8") as fh:
        assert "checked parameters" in fh.read()


def test_failing_create_surfaces_log_tail(paths, tmp_path):
    make_os(paths, "broken", create='echo "step one"\necho "disk exploded" >&2\nexit 3')
    with pytest.raises(errors.OpExecError) as exc_info:
        osapi.create_os(paths, instance([], os_name="broken"), timeout=30)
    msg = str(exc_info.value)
    assert "exit code 3" in msg
    assert "disk exploded" in msg and "step one" in msg
    logs = os.listdir(paths.os_log_dir)
    assert len(logs) == 1 and logs[0].startswith("add-broken-inst1.example.com-")


def test_create_timeout(paths):
    make_os(paths, "slow", create="sleep 30")
    with pytest.raises(errors.OpExecError, match="timed out"):
        osapi.create_os(paths, instance([], os_name="slow"), timeout=0.5)


def test_log_names_are_unique(paths):
    make_os(paths, "quick")
    logs = {osapi.create_os(paths, instance([], os_name="quick"), clock=lambda: 0.0)
            for _ in range(3)}
    assert len(logs) == 3


def test_shipped_tinyos_scripts_are_posix_sh():
    for script in ("create", "import", "export", "rename", "verify"):
        first = (TINYOS / script).read_text().splitlines()[0]
        assert first == "#!/bin/sh", script
