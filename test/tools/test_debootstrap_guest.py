"""ganeti-instance-debootstrap on guest nodes: the files, the shell that writes them, the cache."""

from __future__ import annotations

import os
import subprocess

from ganeti.utils.process import RunResult
from tools.harness import debootstrap, debootstrap_guest

CONF = "/etc/ganeti/instance-debootstrap"


def test_config_files_are_the_packages_layout_in_the_nodes_etc():
    files = debootstrap_guest.config_files("v1", "bookworm", "http://archive.invalid/debian",
                                           "#!/bin/sh\necho hook\n", ["default"])
    assert sorted(files) == [f"{CONF}/v1-hooks/extlinux", f"{CONF}/variants.list",
                             f"{CONF}/variants/v1.conf"]
    mode, conf = files[f"{CONF}/variants/v1.conf"]
    assert mode == 0o644
    assert f'CUSTOMIZE_DIR="{CONF}/v1-hooks"' in conf.splitlines()
    assert 'SUITE="bookworm"' in conf.splitlines()
    assert files[f"{CONF}/v1-hooks/extlinux"] == (0o755, "#!/bin/sh\necho hook\n")
    assert files[f"{CONF}/variants.list"] == (0o644, "default\nv1\n")
    # a variant already listed is not listed twice
    again = debootstrap_guest.config_files("v1", "bookworm", "http://a.invalid", "",
                                           ["default", "v1"])
    assert again[f"{CONF}/variants.list"][1] == "default\nv1\n"


def test_the_writer_script_writes_every_file_with_its_mode(tmp_path):
    text = "it's \"quoted\" $HOME `x`\n\\n and %s\n"
    files = {str(tmp_path / "a" / "b" / "one"): (0o755, text),
             str(tmp_path / "two"): (0o644, "")}
    script = debootstrap_guest.writer_script(files)
    subprocess.run(["sh", "-c", script], check=True, env={"PATH": os.environ["PATH"]})
    assert (tmp_path / "a" / "b" / "one").read_text() == text
    assert (tmp_path / "a" / "b" / "one").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "two").read_text() == ""
    assert (tmp_path / "two").stat().st_mode & 0o777 == 0o644
    assert sorted(os.listdir(tmp_path)) == ["a", "two"]      # no temporary file left


def test_install_on_guest_runs_one_command_and_reports_failure(monkeypatch):
    monkeypatch.setattr(debootstrap_guest, "_package_variants", lambda: ["default"])
    seen: list[str] = []

    def run(command: str) -> RunResult:
        seen.append(command)
        return RunResult(("sh",), 0, None, "", "")

    files = debootstrap_guest.install_on_guest(run, "v2", suite="bookworm",
                                               mirror="http://archive.invalid/debian")
    assert len(seen) == 1 and seen[0] == debootstrap_guest.writer_script(files)
    with open(debootstrap.HOOK, encoding="utf-8") as fh:
        assert files[f"{CONF}/v2-hooks/extlinux"][1] == fh.read()

    def failing(command: str) -> RunResult:
        return RunResult(("sh",), 1, None, "", "read-only file system")

    try:
        debootstrap_guest.install_on_guest(failing, "v2", suite="bookworm",
                                           mirror="http://archive.invalid/debian")
    except RuntimeError as err:
        assert "read-only file system" in str(err)
    else:
        raise AssertionError("no error")


def test_cache_problem_names_a_missing_or_old_tarball(tmp_path):
    path = tmp_path / "cache-bookworm-amd64.tar"
    assert debootstrap_guest.cache_file("bookworm", "amd64", str(tmp_path)) == str(path)

    def problem(now: float) -> str:
        return debootstrap_guest.cache_problem("bookworm", now, arch="amd64",
                                               cache_dir=str(tmp_path))

    assert "missing" in problem(0.0)
    path.write_bytes(b"")
    os.utime(path, (1_000_000.0, 1_000_000.0))
    assert problem(1_000_000.0 + 86400) == ""
    assert "older than" in problem(1_000_000.0 + 13 * 86400)
