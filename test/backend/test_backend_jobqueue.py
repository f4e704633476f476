"""Tests for ganeti.backend.jobqueue."""

from __future__ import annotations

import os

import pytest

from ganeti import errors
from ganeti.backend import jobqueue


def test_update_canonical_and_relative(ctx) -> None:
    jobqueue.jobqueue_update(ctx, "/var/lib/ganeti/queue/job-1", "one")
    jobqueue.jobqueue_update(ctx, "archive/0/job-2", "two")
    q = ctx.paths.queue_dir
    assert open(os.path.join(q, "job-1")).read() == "one"
    assert open(os.path.join(q, "archive", "0", "job-2")).read() == "two"


@pytest.mark.parametrize("name", [
    "../config.data", "/var/lib/ganeti/config.data", "/var/lib/ganeti/queue/../config.data",
    "/var/lib/ganeti/queue", "", "archive/../../x",
], ids=["dotdot", "other-abs", "abs-dotdot", "queue-dir-itself", "empty", "nested-dotdot"])
def test_update_refuses_escaping_names(ctx, name: str) -> None:
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update(ctx, name, "evil")
    assert not os.path.exists(ctx.paths.config_file)


def test_update_refuses_symlink_out(ctx, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, os.path.join(ctx.paths.queue_dir, "link"))
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update(ctx, "link/job-1", "evil")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name", [
    "../config.data", "/var/lib/ganeti/config.data", "/var/lib/ganeti/queue/../config.data",
    "/var/lib/ganeti/queue", "archive/../../x", "link/job-1", "job-link",
], ids=["dotdot", "other-abs", "abs-dotdot", "queue-dir-itself", "nested-dotdot",
        "dir-link-out", "file-link-out"])
def test_a_batch_with_one_escaping_name_writes_nothing(ctx, tmp_path, name: str) -> None:
    # the batch resolves each directory once (jobqueue.queue_file_path's
    # ``resolved``): the same names as one by one are refused
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, os.path.join(ctx.paths.queue_dir, "link"))
    os.symlink(outside / "target", os.path.join(ctx.paths.queue_dir, "job-link"))
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update_many(ctx, [["job-1", "one"], ["archive/0/job-2", "two"],
                                            [name, "evil"]])
    assert list(outside.iterdir()) == []
    assert not os.path.exists(os.path.join(ctx.paths.queue_dir, "job-1"))
    assert not os.path.exists(ctx.paths.config_file)


def test_a_batch_resolving_directories_once_writes_every_file(ctx) -> None:
    jobqueue.jobqueue_update_many(ctx, [["job-1", "one"], ["/var/lib/ganeti/queue/job-2", "two"],
                                        ["archive/0/job-3", "three"], ["job-1", "uno"]])
    q = ctx.paths.queue_dir
    assert open(os.path.join(q, "job-1")).read() == "uno"
    assert open(os.path.join(q, "job-2")).read() == "two"
    assert open(os.path.join(q, "archive", "0", "job-3")).read() == "three"


def test_rename(ctx) -> None:
    jobqueue.jobqueue_update(ctx, "job-5", "five")
    jobqueue.jobqueue_rename(ctx, [["job-5", "archive/0/job-5"]])
    q = ctx.paths.queue_dir
    assert not os.path.exists(os.path.join(q, "job-5"))
    assert open(os.path.join(q, "archive", "0", "job-5")).read() == "five"


def test_rename_of_a_file_not_here_is_skipped(ctx) -> None:
    # a queue copy archived it already (or the node never had it)
    jobqueue.jobqueue_update(ctx, "archive/0/job-5", "five")
    jobqueue.jobqueue_update(ctx, "job-6", "six")
    jobqueue.jobqueue_rename(ctx, [["job-5", "archive/0/job-5"], ["job-7", "archive/0/job-7"],
                                   ["job-6", "archive/0/job-6"]])
    archive = os.path.join(ctx.paths.queue_dir, "archive", "0")
    assert sorted(os.listdir(archive)) == ["job-5", "job-6"]


def test_rename_checks_all_before_renaming(ctx) -> None:
    jobqueue.jobqueue_update(ctx, "job-5", "five")
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_rename(ctx, [["job-5", "job-6"], ["job-6", "../../escape"]])
    assert os.path.exists(os.path.join(ctx.paths.queue_dir, "job-5"))


def test_purge_keeps_lock(ctx) -> None:
    jobqueue.jobqueue_update(ctx, "job-1", "x")
    jobqueue.jobqueue_update(ctx, "archive/0/job-2", "x")
    open(ctx.paths.queue_lock_file, "w").close()
    jobqueue.jobqueue_purge(ctx)
    assert os.listdir(ctx.paths.queue_dir) == ["lock"]


def test_drain_flag(ctx) -> None:
    jobqueue.jobqueue_set_drain_flag(ctx, True)
    assert os.path.exists(ctx.paths.queue_drain_file)
    jobqueue.jobqueue_set_drain_flag(ctx, False)
    assert not os.path.exists(ctx.paths.queue_drain_file)
    jobqueue.jobqueue_set_drain_flag(ctx, False)   # idempotent


def test_purge_ignores_entries_that_vanish(ctx, monkeypatch) -> None:
    # a concurrent writer renamed its temporary file away between listing and removal
    jobqueue.jobqueue_update(ctx, "job-1", "x")
    real_listdir = os.listdir
    monkeypatch.setattr(jobqueue.os, "listdir",
                        lambda path: real_listdir(path) + ["job-2.tmp-gone"])
    jobqueue.jobqueue_purge(ctx)
    monkeypatch.undo()
    assert os.listdir(ctx.paths.queue_dir) == []


def test_purge_reports_what_it_cannot_remove(ctx, monkeypatch) -> None:
    jobqueue.jobqueue_update(ctx, "job-1", "x")
    jobqueue.jobqueue_update(ctx, "job-2", "x")

    def unlink(path):
        if path.endswith("job-1"):
            raise PermissionError(13, "Permission denied")
        return real_unlink(path)

    real_unlink = os.unlink
    monkeypatch.setattr(jobqueue.os, "unlink", unlink)
    with pytest.raises(errors.OpExecError, match="job-1.*Permission denied"):
        jobqueue.jobqueue_purge(ctx)
    monkeypatch.undo()
    assert os.listdir(ctx.paths.queue_dir) == ["job-1"]   # the others went anyway


def test_sync_writes_all_and_archives_what_the_master_archived(ctx) -> None:
    q = ctx.paths.queue_dir
    for name in ("job-1", "job-2", "job-10007"):
        jobqueue.jobqueue_update(ctx, name, "stale")
    jobqueue.jobqueue_set_drain_flag(ctx, True)
    jobqueue.jobqueue_update(ctx, "job-10008", "created after the master's read")
    archived = jobqueue.jobqueue_sync(ctx, [["/var/lib/ganeti/queue/job-2", "2"],
                                            ["job-3", "3"], ["serial", "10007\n"]],
                                      ["job-2", "job-3", "job-4", "serial"], 10007)
    assert archived == ["job-1", "job-10007"]   # job-4: named (sent in an earlier part)
    # drain cleared; job-10008 is newer than the master's serial: left alone
    # (besides the spare inodes of the rewrites, see the next test)
    assert sorted(n for n in os.listdir(q) if not n.startswith(".scratch-")) \
        == ["archive", "job-10008", "job-2", "job-3", "serial"]
    with open(os.path.join(q, "job-2")) as fh:
        assert fh.read() == "2"
    with open(os.path.join(q, "archive", "0", "job-1")) as fh:
        assert fh.read() == "stale"
    assert os.path.exists(os.path.join(q, "archive", "1", "job-10007"))
    # a drain flag the master has stays
    jobqueue.jobqueue_set_drain_flag(ctx, True)
    jobqueue.jobqueue_sync(ctx, [["job-3", "3"]], ["drain", "job-3"], 3)
    assert os.path.exists(ctx.paths.queue_drain_file)


def test_sync_refuses_bad_names_and_changes_nothing(ctx) -> None:
    jobqueue.jobqueue_update(ctx, "job-1", "x")
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_sync(ctx, [["job-2", "2"], ["../config.data", "evil"]], ["job-2"], 2)
    assert os.listdir(ctx.paths.queue_dir) == ["job-1"]


def test_a_rewritten_job_file_keeps_its_old_inode_as_a_spare(ctx) -> None:
    """A replicated job file is swapped with a spare inode, not renamed over
    (the old inode is kept for the next write instead of being freed).  The
    sync above leaves such spares too."""
    jobqueue.jobqueue_update_many(ctx, [["job-1", "v1"], ["job-2", "a"]])
    path = os.path.join(ctx.paths.queue_dir, "job-1")
    first_inode = os.stat(path).st_ino
    jobqueue.jobqueue_update_many(ctx, [["job-1", "v2 longer"]])
    with open(path) as fh:
        assert fh.read() == "v2 longer"
    spares = [n for n in os.listdir(ctx.paths.queue_dir) if n.startswith(".scratch-")]
    assert [os.stat(os.path.join(ctx.paths.queue_dir, n)).st_ino for n in spares] \
        == [first_inode]
    # a process started later (a new node daemon child) adopts it
    jobqueue._SCRATCH.clear()
    jobqueue.jobqueue_update_many(ctx, [["job-2", "b"]])
    assert os.stat(os.path.join(ctx.paths.queue_dir, "job-2")).st_ino == first_inode


def test_rename_into_a_directory_linked_out_of_the_queue_is_refused(ctx, tmp_path) -> None:
    # the directory of every pair is resolved once per request: a linked
    # archive directory is refused for every pair naming it, and nothing moves
    jobqueue.jobqueue_update(ctx, "job-5", "five")
    jobqueue.jobqueue_update(ctx, "job-6", "six")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.makedirs(os.path.join(ctx.paths.queue_dir, "archive"), exist_ok=True)
    os.symlink(outside, os.path.join(ctx.paths.queue_dir, "archive", "0"))
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_rename(ctx, [["job-5", "archive/0/job-5"], ["job-6", "archive/0/job-6"]])
    assert sorted(n for n in os.listdir(ctx.paths.queue_dir) if n.startswith("job-")) \
        == ["job-5", "job-6"]
    assert os.listdir(outside) == []
