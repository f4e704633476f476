"""Tests for ganeti.backend.replication (one push per candidate)."""

from __future__ import annotations

import os
import stat

import pytest

from ganeti import errors, ssconf
from ganeti.backend import replication
from ganeti.utils import payload


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def test_writes_config_ssconf_and_queue_files(ctx) -> None:
    os.makedirs(os.path.join(ctx.paths.hooks_base_dir, "instance-add-pre.d"))
    with open(os.path.join(ctx.paths.hooks_base_dir, "instance-add-pre.d", "x"), "w"):
        pass
    hooks = replication.replicate_state(
        ctx, ["/var/lib/ganeti/config.data", '{"serial": 3}'],
        {"cluster_name": "c.example.com", "master_node": "node1"},
        [["/var/lib/ganeti/queue/job-5", "five"], ["job-6", "six"]])
    assert _read(ctx.paths.config_file) == '{"serial": 3}'
    assert stat.S_IMODE(os.stat(ctx.paths.config_file).st_mode) == 0o640
    assert ssconf.SimpleStore(ctx.paths).get_master_node() == "node1"
    assert _read(os.path.join(ctx.paths.queue_dir, "job-5")) == "five"
    assert _read(os.path.join(ctx.paths.queue_dir, "job-6")) == "six"
    assert hooks == ["instance-add-pre.d"]        # the hooks_list answer, for free


def test_null_parts_are_skipped(ctx) -> None:
    assert replication.replicate_state(ctx, None, None, []) == []
    assert not os.path.exists(ctx.paths.config_file)


def test_every_part_is_attempted_and_all_failures_reported(ctx) -> None:
    with pytest.raises(errors.OpExecError) as info:
        replication.replicate_state(ctx, ["/etc/passwd", "evil"], {"Bad Key": "x"},
                                    [["job-7", "seven"]])
    text = str(info.value)
    assert "/etc/passwd" in text and "Bad Key" in text
    # the valid part still went through; the refused ones wrote nothing
    assert _read(os.path.join(ctx.paths.queue_dir, "job-7")) == "seven"
    assert not os.path.exists(ctx.paths.config_file)
    assert not os.path.exists(os.path.join(ctx.paths.root, "etc", "passwd"))


def test_queue_files_outside_the_queue_are_refused(ctx) -> None:
    with pytest.raises(errors.OpExecError):
        replication.replicate_state(ctx, None, None, [["job-8", "ok"], ["../config.data", "x"]])
    # all queue names are checked before any is written
    assert not os.path.exists(os.path.join(ctx.paths.queue_dir, "job-8"))
    assert not os.path.exists(ctx.paths.config_file)


def test_malformed_config_entry(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="invalid config entry"):
        replication.replicate_state(ctx, ["only-a-name"], None, [])


def test_compressed_config_is_written_as_exactly_the_original_bytes(ctx) -> None:
    # not plain ASCII, no trailing newline: the file must hold these bytes, no more
    original = ('{"serial": 4, "name": "n\u00e9ud", "pad": "' + "x" * 5000 + '"}').encode()
    replication.replicate_state(
        ctx, ["/var/lib/ganeti/config.data", payload.encode_payload(original)], None, [])
    with open(ctx.paths.config_file, "rb") as fh:
        assert fh.read() == original
    assert stat.S_IMODE(os.stat(ctx.paths.config_file).st_mode) == 0o640


def test_uncompressed_encoded_config_is_accepted(ctx) -> None:
    replication.replicate_state(
        ctx, ["/var/lib/ganeti/config.data", [payload.ENCODING_NONE, '{"serial": 5}']], None, [])
    assert _read(ctx.paths.config_file) == '{"serial": 5}'


@pytest.mark.parametrize("content, message", [
    ([7, "abc"], "Unknown content encoding 7"),
    ([payload.ENCODING_ZLIB_BASE64, "not base64!"], "Invalid base64"),
    ([payload.ENCODING_ZLIB_BASE64, "aGVsbG8="], "Invalid zlib"),
], ids=["unknown-encoding", "bad-base64", "not-zlib"])
def test_bad_config_encoding_is_refused_and_nothing_written(ctx, content, message) -> None:
    with pytest.raises(errors.OpExecError, match=message) as info:
        replication.replicate_state(ctx, ["/var/lib/ganeti/config.data", content], None,
                                    [["job-9", "nine"]])
    assert "config /var/lib/ganeti/config.data" in str(info.value)
    assert not os.path.exists(ctx.paths.config_file)
    # the other parts still went through
    assert _read(os.path.join(ctx.paths.queue_dir, "job-9")) == "nine"


def test_compressed_config_larger_than_the_upload_limit_is_refused(ctx, monkeypatch) -> None:
    monkeypatch.setattr(replication, "MAX_UPLOAD_SIZE", 1000)
    with pytest.raises(errors.OpExecError, match="larger than 1000 bytes"):
        replication.replicate_state(
            ctx, ["/var/lib/ganeti/config.data", payload.encode_payload(b"x" * 5000)], None, [])
    assert not os.path.exists(ctx.paths.config_file)
