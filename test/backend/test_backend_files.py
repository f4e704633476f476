"""Tests for ganeti.backend.files."""

from __future__ import annotations

import os
import stat

import pytest

from ganeti import errors
from ganeti.backend import files


def test_upload_allowed_file(ctx) -> None:
    files.upload_file(ctx, "/var/lib/ganeti/config.data", "{}", 0o640, None, None, 1000.0)
    path = ctx.paths.config_file
    assert open(path).read() == "{}"
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_mtime == 1000.0


def test_upload_ssconf_file_allowed(ctx) -> None:
    files.upload_file(ctx, "/var/lib/ganeti/ssconf_cluster_name", "c\n", 0o444, None, None, None)
    assert open(ctx.paths.ssconf_file("cluster_name")).read() == "c\n"


@pytest.mark.parametrize("name", [
    "/etc/passwd", "/var/lib/ganeti/../../../etc/passwd", "var/lib/ganeti/config.data",
    "/var/lib/ganeti/queue/job-1", "/var/lib/ganeti/ssconf_../x", "/var/lib/ganeti/config.data/",
    "/var/lib/ganeti/./config.data",
], ids=["passwd", "dotdot", "relative", "queue", "ssconf-dotdot", "trailing-slash", "dot"])
def test_upload_refuses_other_files(ctx, name: str) -> None:
    with pytest.raises(errors.OpExecError, match="not an allowed"):
        files.upload_file(ctx, name, "x", 0o644, None, None, None)


def test_upload_bad_mode(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="mode"):
        files.upload_file(ctx, "/var/lib/ganeti/config.data", "x", 0o177777, None, None, None)


def test_write_ssconf_files_and_stale_removal(ctx) -> None:
    files.write_ssconf_files(ctx, {"cluster_name": "c.example.com", "master_node": "n1"})
    assert open(ctx.paths.ssconf_file("master_node")).read().strip() == "n1"
    files.write_ssconf_files(ctx, {"cluster_name": "c.example.com"})
    assert not os.path.exists(ctx.paths.ssconf_file("master_node"))


@pytest.mark.parametrize("values", [{"../x": "1"}, {"Upper": "1"}, {"ok": 3}],
                         ids=["dotdot", "upper", "non-str"])
def test_write_ssconf_refuses_bad_values(ctx, values) -> None:
    with pytest.raises(errors.OpExecError):
        files.write_ssconf_files(ctx, values)
    assert not [n for n in os.listdir(ctx.paths.data_dir) if n.startswith("ssconf_")]
