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


@pytest.mark.parametrize("mode", [0o4644, 0o2644, 0o1644, 0o6755, 0o646, 0o666, 0o755, 0o744],
                         ids=["setuid", "setgid", "sticky", "setuid-exec", "world-write",
                              "world-rw", "exec", "owner-exec"])
def test_upload_refuses_dangerous_modes(ctx, mode: int) -> None:
    with pytest.raises(errors.OpExecError, match="Refusing mode"):
        files.upload_file(ctx, "/var/lib/ganeti/known_hosts", "x", mode, None, None, None)
    assert not os.path.exists(ctx.paths.known_hosts_file)


@pytest.mark.parametrize("mode", [0o400, 0o600, 0o640, 0o644, 0o660, 0o444])
def test_upload_accepts_cluster_file_modes(ctx, mode: int) -> None:
    files.upload_file(ctx, "/var/lib/ganeti/known_hosts", "x", mode, None, None, None)
    assert stat.S_IMODE(os.stat(ctx.paths.known_hosts_file).st_mode) == mode


@pytest.mark.parametrize("uid,gid", [(12345, None), (None, 12345), (65534, 65534)],
                         ids=["uid", "gid", "nobody"])
def test_upload_refuses_foreign_owners(ctx, uid, gid) -> None:
    if os.geteuid() in (12345, 65534) or os.getegid() in (12345, 65534):
        pytest.skip("the test's ids are this process's own")
    with pytest.raises(errors.OpExecError, match="Refusing [ug]id"):
        files.upload_file(ctx, "/var/lib/ganeti/known_hosts", "x", 0o644, uid, gid, None)
    assert not os.path.exists(ctx.paths.known_hosts_file)


def test_upload_accepts_own_owner(ctx) -> None:
    files.upload_file(ctx, "/var/lib/ganeti/known_hosts", "x", 0o644, os.geteuid(),
                      os.getegid(), None)
    st = os.stat(ctx.paths.known_hosts_file)
    assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


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
