"""The real ganeti-masterd with ``config.data`` on a 1 MiB tmpfs that fills up
(issue 19, item 1): a change that cannot be written fails cleanly, memory
and disk keep agreeing, and once there is room the same change works
without a restart.

The job queue gets its own (roomy) tmpfs mounted inside, so that jobs can
still be submitted and recorded while the config's filesystem is full.
Mounting needs root (as in CI); elsewhere the test is skipped with the
reason, and test/test_config_full_disk.py covers the same without root.

Queries never show a change before it is on disk, nor one whose write
fails: the failing write is stretched to seconds (strace delays the
daemon's removal of its temporary file, the last step before the change
is undone) and every query path is asked while it lasts.
test/test_config_committed.py covers the same without root or strace.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any

import pytest

from ganeti import serializer
from ganeti.pathutils import Paths
from test.integration.host_helpers import SlowSyscalls, fill, mount_tmpfs, skip_unless, umount
from test.integration.masterd_harness import MasterdHandle, prepare_root, start_masterd

DEADLINE = 40.0      # real seconds
HELD_WRITE = 3.0     # real seconds the failing write is stretched to


@pytest.fixture
def full_config_masterd(tmp_path):
    paths = Paths(root=os.path.abspath(os.path.join(tmp_path, "root")))
    mounted: list[str] = []
    handle = None
    try:
        skip_unless(mount_tmpfs(paths.data_dir, "1m", "the config"))
        mounted.append(paths.data_dir)
        skip_unless(mount_tmpfs(paths.queue_dir, "16m", "the queue"))
        mounted.append(paths.queue_dir)
        prepare_root(paths.root)
        handle = start_masterd(tmp_path, workers=2)
        yield handle
    finally:
        if handle is not None:
            handle.close()
        for path in reversed(mounted):
            umount(path)


def _run(h: MasterdHandle, op: dict[str, Any]) -> tuple[str, Any]:
    job = h.call("SubmitJob", [[op]])
    deadline = time.monotonic() + DEADLINE
    while True:
        status, result = h.call("QueryJobs", [[job], ["status", "opresult"]])[0]
        if status in ("success", "error", "canceled"):
            return status, result
        assert time.monotonic() < deadline, f"job {job} still {status}"
        time.sleep(0.05)


def _on_disk(h: MasterdHandle) -> dict[str, Any]:
    with open(h.paths.config_file, "rb") as fh:
        return serializer.loads(fh.read())


def _shown(h: MasterdHandle) -> dict[str, Any]:
    return h.call("QueryClusterInfo", [])


def _groups(h: MasterdHandle) -> list[str]:
    return sorted(row[0] for row in h.call("Query", ["group", ["name"], None])["data"]
                  for row in [[cell[1] for cell in row]])


def test_a_full_config_disk_fails_changes_cleanly_and_recovers(
        full_config_masterd: MasterdHandle) -> None:
    h = full_config_masterd
    before = _on_disk(h)
    pool = before["cluster"]["candidate_pool_size"]
    filler = fill(h.paths.data_dir)
    # gnt-cluster modify -C ...: the job fails with the cause, nothing changed
    modify = _run(h, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": pool + 3})
    # gnt-cluster info and the file agree: the change is in neither
    on_disk = _on_disk(h)
    assert on_disk == before
    assert _shown(h)["candidate_pool_size"] == pool
    # gnt-group add: the same, and no half-added group in memory
    add = _run(h, {"OP_ID": "OP_GROUP_ADD", "group_name": "full"})
    assert _groups(h) == ["default"] and _on_disk(h) == before
    for status, result in (modify, add):
        assert status == "error"
        assert "No space left on device" in str(result) and "not saved" in str(result)
    assert os.listdir(h.paths.data_dir).count("config.data") == 1
    assert not [n for n in os.listdir(h.paths.data_dir) if n.startswith(".config.data")]
    # room again: the same commands simply work, without a restart
    os.unlink(filler)
    assert _run(h, {"OP_ID": "OP_CLUSTER_SET_PARAMS",
                    "candidate_pool_size": pool + 3})[0] == "success"
    assert _run(h, {"OP_ID": "OP_GROUP_ADD", "group_name": "full"})[0] == "success"
    on_disk = _on_disk(h)
    assert on_disk["cluster"]["candidate_pool_size"] == pool + 3
    assert _shown(h)["candidate_pool_size"] == pool + 3
    assert _groups(h) == ["default", "full"]
    assert on_disk["serial_no"] > before["serial_no"]
    with open(h.log_path, encoding="utf-8", errors="replace") as fh:
        assert "CRITICAL" in fh.read()


def _wait_job(h: MasterdHandle, job: int) -> tuple[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while True:
        status, result = h.call("QueryJobs", [[job], ["status", "opresult"]])[0]
        if status in ("success", "error", "canceled"):
            return status, result
        assert time.monotonic() < deadline, f"job {job} still {status}"
        time.sleep(0.05)


def _cluster_tags_everywhere(h: MasterdHandle) -> dict[str, list[str]]:
    """The cluster's tags as every read path shows them."""
    (row,) = h.call("Query", ["cluster", ["tags"], None])["data"]
    return {"QueryClusterInfo": h.call("QueryClusterInfo", [])["tags"],
            "QueryConfigValues": h.call("QueryConfigValues", [["cluster_tags"]])[0],
            "QueryTags": h.call("QueryTags", ["cluster", ""]),
            "Query": row[0][1]}


def _temporaries(h: MasterdHandle) -> list[str]:
    return glob.glob(os.path.join(h.paths.data_dir, ".config.data.tmp*"))


def test_queries_never_show_a_change_whose_write_fails(
        full_config_masterd: MasterdHandle) -> None:
    h = full_config_masterd
    before = _on_disk(h)
    filler = fill(h.paths.data_dir)
    slow = SlowSyscalls(h.pid or 0, ["unlink", "unlinkat"], HELD_WRITE)
    try:
        skip_unless(slow.reason)
        job = h.call("SubmitJob", [[{"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                                     "tags": ["uncommitted"]}]])
        deadline = time.monotonic() + DEADLINE
        while not _temporaries(h):          # the write has started (and is failing)
            assert time.monotonic() < deadline, "the config write never started"
            time.sleep(0.005)
        during = _cluster_tags_everywhere(h)
        assert _temporaries(h), "the held write ended before the queries did"
        status, result = _wait_job(h, job)
    finally:
        slow.stop()
    assert during == dict.fromkeys(during, [])
    assert status == "error" and "No space left on device" in str(result)
    after = _cluster_tags_everywhere(h)
    assert after == dict.fromkeys(after, [])
    assert _on_disk(h) == before
    # room again: the same change is shown once it is on disk
    os.unlink(filler)
    assert _run(h, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["uncommitted"]})[0] \
        == "success"
    shown = _cluster_tags_everywhere(h)
    assert shown == dict.fromkeys(shown, ["uncommitted"])
    assert _on_disk(h)["cluster"]["tags"] == ["uncommitted"]
