"""Tests for ganeti.backend.joblog: a node's job log and job files on request."""

from __future__ import annotations

import os

import pytest

from ganeti import errors
from ganeti.backend import joblog
from ganeti.pathutils import archived_job_file_name, job_file_name


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def _queue(ctx) -> None:
    p = ctx.paths
    for job_id in (1, 2, 3, 7):
        _write(archived_job_file_name(p.queue_archive_dir, job_id), f"archived {job_id}")
    for job_id in (8, 10):
        _write(job_file_name(p.queue_dir, job_id), f"job {job_id}")
    _write(p.queue_serial_file, "12\n")


def test_the_log_names_every_job_of_queue_and_archive_and_the_serial(ctx) -> None:
    _queue(ctx)
    assert joblog.jobqueue_log(ctx) == {"ids": [[1, 3], [7, 8], [10, 10]], "serial": 12}


def test_fetch_returns_where_each_job_was_and_skips_what_is_not_held(ctx) -> None:
    _queue(ctx)
    assert joblog.jobqueue_fetch(ctx, [2, 10, 11]) == [[2, "archive", "archived 2"],
                                                       [10, "queue", "job 10"]]


def test_fetch_answers_in_parts(ctx, monkeypatch) -> None:
    _queue(ctx)
    monkeypatch.setattr(joblog, "FETCH_MAX_BYTES", 8)
    assert [item[0] for item in joblog.jobqueue_fetch(ctx, [8, 10])] == [8]


def test_fetch_does_not_follow_a_symbolic_link(ctx, tmp_path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("secret")
    os.symlink(secret, job_file_name(ctx.paths.queue_dir, 5))
    assert joblog.jobqueue_fetch(ctx, [5]) == []


@pytest.mark.parametrize("ids", [None, ["1"], [0], [True]], ids=["none", "text", "zero", "bool"])
def test_fetch_refuses_bad_ids(ctx, ids) -> None:
    with pytest.raises(errors.OpExecError):
        joblog.jobqueue_fetch(ctx, ids)
