"""The ganeti-instance-debootstrap harness: apt sources, the variant, a node's OS directory."""

from __future__ import annotations

import os
import subprocess

import pytest

from ganeti.pathutils import Paths
from tools.harness import debootstrap

DEB822 = """\
# the main archive
Types: deb deb-src
URIs: http://archive.invalid/debian/
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def test_deb822_sources_give_the_archive_of_the_suite():
    files = [("/etc/apt/sources.list.d/debian.sources", DEB822)]
    assert debootstrap.parse_apt_sources(files, "bookworm") == ["http://archive.invalid/debian"]
    assert debootstrap.parse_apt_sources(files, "bookworm-security") == [
        "http://security.invalid/debian-security"]
    assert debootstrap.parse_apt_sources(files, "trixie") == []


def test_deb822_disabled_source_only_or_without_main_is_skipped():
    text = ("Types: deb\nURIs: http://off.invalid/debian\nSuites: bookworm\n"
            "Components: main\nEnabled: no\n\n"
            "Types: deb-src\nURIs: http://src.invalid/debian\nSuites: bookworm\n"
            "Components: main\n\n"
            "Types: deb\nURIs: http://contrib.invalid/debian\nSuites: bookworm\n"
            "Components: contrib\n\n"
            "Types: deb\nURIs: file:/srv/mirror\nSuites: bookworm\nComponents: main\n\n"
            "Types: deb\nURIs:\n http://folded.invalid/debian\nSuites: bookworm\n"
            "Components: main\n")
    assert debootstrap.parse_apt_sources([("x.sources", text)], "bookworm") == [
        "http://folded.invalid/debian"]


def test_one_line_sources_with_options_and_comments():
    text = ("# deb http://commented.invalid/debian bookworm main\n"
            "deb-src http://src.invalid/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] https://opts.invalid/debian/ bookworm main\n"
            "deb http://plain.invalid/debian bookworm contrib main # trailing\n"
            "deb http://other.invalid/debian trixie main\n")
    assert debootstrap.parse_apt_sources([("sources.list", text)], "bookworm") == [
        "https://opts.invalid/debian", "http://plain.invalid/debian"]


def test_host_mirror_reads_every_apt_source_file(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb http://first.invalid/debian sid main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert debootstrap.host_mirror("bookworm", str(tmp_path)) == "http://archive.invalid/debian"
    assert debootstrap.host_mirror("sid", str(tmp_path)) == "http://first.invalid/debian"
    assert debootstrap.host_mirror("buster", str(tmp_path)) == ""


def test_host_codename(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\n')
    assert debootstrap.host_codename(str(release)) == "bookworm"
    assert debootstrap.host_codename(str(tmp_path / "missing")) == ""


def test_the_variant_config_is_shell_the_package_can_source(tmp_path):
    conf = debootstrap.variant_config("bookworm", "http://archive.invalid/debian", "/h")
    out = subprocess.run(["bash", "-c", f'{conf}\necho "$SUITE|$MIRROR|$EXTRA_PKGS|'
                          '$PARTITION_STYLE|$CUSTOMIZE_DIR"'],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == ("bookworm|http://archive.invalid/debian|linux-image-cloud-amd64|none|/h")


def test_setup_variant_writes_the_conf_and_the_hook(tmp_path):
    conf = debootstrap.setup_variant("v1", str(tmp_path), suite="bookworm",
                                     mirror="http://archive.invalid/debian")
    assert conf == str(tmp_path / "variants" / "v1.conf")
    hook = tmp_path / "v1-hooks" / "extlinux"
    assert os.access(hook, os.X_OK)
    with open(debootstrap.HOOK, encoding="utf-8") as fh:
        assert hook.read_text() == fh.read()
    assert f'CUSTOMIZE_DIR="{tmp_path / "v1-hooks"}"' in (tmp_path / "variants" / "v1.conf").read_text()
    # again: the same files, no leftovers
    debootstrap.setup_variant("v1", str(tmp_path), suite="bookworm",
                              mirror="http://archive.invalid/debian")
    assert sorted(os.listdir(tmp_path / "variants")) == ["v1.conf"]
    assert sorted(os.listdir(tmp_path / "v1-hooks")) == ["extlinux"]


#: what the package's common.sh does with VARIANTS_DIR (its default when unset)
FAKE_COMMON = """\
: ${VARIANTS_DIR:="/etc/ganeti/instance-debootstrap/variants"}
. "$VARIANTS_DIR/$OS_VARIANT.conf"
grep -qxF "$OS_VARIANT" variants.list
echo "$SUITE|$CUSTOMIZE_DIR"
"""
MIRROR = "http://archive.invalid/debian"


def _package(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name in ("create", "rename", "ganeti_api_version"):
        (pkg / name).write_text(name)
    (pkg / "common.sh").write_text(FAKE_COMMON)
    (pkg / "variants.list").write_text("default\n")
    return pkg


def test_install_on_node_links_the_package_files_and_lists_the_variant(tmp_path):
    pkg = _package(tmp_path)
    paths = Paths(root=str(tmp_path / "node"))
    dest = debootstrap.install_on_node(paths, "v1", str(pkg), suite="bookworm", mirror=MIRROR)
    assert dest == os.path.join(str(tmp_path / "node"), "usr", "share", "ganeti", "os", "pkg")
    assert os.readlink(os.path.join(dest, "create")) == str(pkg / "create")
    assert open(os.path.join(dest, "variants.list")).read() == "default\nv1\n"
    # a second time: nothing duplicated
    debootstrap.install_on_node(paths, "v1", str(pkg), suite="bookworm", mirror=MIRROR)
    assert open(os.path.join(dest, "variants.list")).read() == "default\nv1\n"


def test_the_variant_is_written_below_the_node_root_not_the_machines(tmp_path):
    pkg = _package(tmp_path)
    paths = Paths(root=str(tmp_path / "node"))
    dest = debootstrap.install_on_node(paths, "v1", str(pkg), suite="bookworm", mirror=MIRROR)
    conf_dir = tmp_path / "node" / "etc" / "ganeti" / "instance-debootstrap"
    assert debootstrap.node_conf_dir(paths) == str(conf_dir)
    assert sorted(os.listdir(conf_dir)) == ["v1-hooks", "variants"]
    assert (conf_dir / "variants" / "v1.conf").is_file()
    # the node's common.sh is not the package's link but points it at the node's variants
    common = os.path.join(dest, "common.sh")
    assert not os.path.islink(common)
    assert open(common).read() == debootstrap.common_shim(str(conf_dir / "variants"), str(pkg))
    # sourced from the OS directory, as the node daemon runs the scripts (cwd there,
    # a clean environment): the package's script reads the node's variant
    res = subprocess.run(["bash", "-c", ". common.sh"], cwd=dest, capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "OS_VARIANT": "v1"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"bookworm|{conf_dir / 'v1-hooks'}"


@pytest.mark.skipif(not os.path.isfile(os.path.join(debootstrap.OS_DIR, "common.sh")),
                    reason="ganeti-instance-debootstrap not installed (make debian-deps)")
def test_the_package_takes_its_variants_directory_from_the_environment():
    """What the node's common.sh relies on: the package sets VARIANTS_DIR only when unset."""
    with open(os.path.join(debootstrap.OS_DIR, "common.sh"), encoding="utf-8") as fh:
        assert ': ${VARIANTS_DIR:="' in fh.read()


def test_setup_variant_refuses_without_an_archive(tmp_path, monkeypatch):
    monkeypatch.setattr(debootstrap, "host_mirror", lambda suite: "")
    with pytest.raises(RuntimeError, match="no Debian archive"):
        debootstrap.setup_variant("v1", str(tmp_path), suite="bookworm")


def test_the_hook_refuses_a_guest_without_a_kernel(tmp_path):
    (tmp_path / "boot").mkdir()
    env = {"PATH": os.environ["PATH"], "TARGET": str(tmp_path), "BLOCKDEV": "/dev/null",
           "FSYSDEV": "/dev/null"}
    res = subprocess.run([debootstrap.HOOK], env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "no kernel" in res.stderr
    (tmp_path / "boot" / "vmlinuz-6.1.0-1-cloud-amd64").write_text("")
    res = subprocess.run([debootstrap.HOOK], env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "no initramfs for kernel 6.1.0-1-cloud-amd64" in res.stderr
    res = subprocess.run([debootstrap.HOOK], env={"PATH": os.environ["PATH"]},
                         capture_output=True, text=True)
    assert res.returncode == 1 and "must be set" in res.stderr
