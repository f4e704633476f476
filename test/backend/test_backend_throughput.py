"""Node side of the master throughput work: jobqueue_update_many, hooks_list,
instance_start folding the "already running?" check."""

from __future__ import annotations

import os

import pytest

from ganeti import errors, serializer
from ganeti.backend import hooks, instance, jobqueue
from ganeti.cmdlib import instance_operation
from ganeti.objects import Instance

NAME = "inst1.example.com"


def _inst() -> dict:
    return serializer.to_data(Instance(name=NAME, uuid="u1", os="tinyos", hypervisor="fake",
                                       disk_template="diskless",
                                       beparams={"maxmem": 128, "minmem": 128, "vcpus": 1}))


# --- jobqueue_update_many -------------------------------------------------------------

def test_update_many_writes_all_in_order(ctx) -> None:
    jobqueue.jobqueue_update_many(ctx, [["/var/lib/ganeti/queue/job-1", "one"],
                                        ["archive/0/job-2", "two"],
                                        ["/var/lib/ganeti/queue/job-1", "one again"]])
    q = ctx.paths.queue_dir
    assert open(os.path.join(q, "job-1")).read() == "one again"      # later entry wins
    assert open(os.path.join(q, "archive", "0", "job-2")).read() == "two"


def test_update_many_empty_list_is_fine(ctx) -> None:
    jobqueue.jobqueue_update_many(ctx, [])
    assert os.listdir(ctx.paths.queue_dir) == []


@pytest.mark.parametrize("bad", [
    ["../config.data", "x"], ["/var/lib/ganeti/config.data", "x"], ["", "x"],
    ["job-3"], ["job-3", 5], "job-3",
], ids=["dotdot", "other-abs", "empty", "short", "content-type", "not-a-pair"])
def test_update_many_checks_every_entry_before_writing(ctx, bad) -> None:
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update_many(ctx, [["job-1", "good"], bad])
    assert not os.path.exists(os.path.join(ctx.paths.queue_dir, "job-1"))
    assert not os.path.exists(ctx.paths.config_file)


def test_update_many_refuses_symlink_out(ctx, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, os.path.join(ctx.paths.queue_dir, "archive"))
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update_many(ctx, [["archive/job-1", "evil"]])
    assert list(outside.iterdir()) == []


def test_update_many_refuses_non_list(ctx) -> None:
    with pytest.raises(errors.OpExecError):
        jobqueue.jobqueue_update_many(ctx, {"job-1": "x"})  # type: ignore[arg-type]


# --- hooks_list ---------------------------------------------------------------------------

def test_hooks_list_reports_non_empty_dirs_only(ctx) -> None:
    assert hooks.hooks_list(ctx) == []          # no hooks directory at all
    base = ctx.paths.hooks_base_dir
    os.makedirs(os.path.join(base, "instance-start-pre.d"))
    os.makedirs(os.path.join(base, "instance-start-post.d"))
    os.makedirs(os.path.join(base, "node-add-pre.d"))
    with open(os.path.join(base, "instance-start-post.d", "10-log"), "w") as fh:
        fh.write("#!/bin/sh\n")
    with open(os.path.join(base, "node-add-pre.d", "not valid.sh"), "w") as fh:
        fh.write("")                             # skipped by the runner, still counts
    with open(os.path.join(base, "stray.d"), "w") as fh:
        fh.write("a file, not a directory")
    assert hooks.hooks_list(ctx) == ["instance-start-post.d", "node-add-pre.d"]


# --- instance_start -----------------------------------------------------------------------

def test_start_refusal_carries_the_marker_the_master_matches(ctx) -> None:
    assert instance.ALREADY_RUNNING == instance_operation.ALREADY_RUNNING
    instance.instance_start(ctx, _inst(), [], False)
    with pytest.raises(errors.HypervisorError) as info:
        instance.instance_start(ctx, _inst(), [], False)
    assert instance_operation.ALREADY_RUNNING in str(info.value)


@pytest.mark.parametrize("how", ["simulate_user_shutdown", "simulate_crash"])
def test_start_cleans_up_an_instance_stopped_inside(ctx, how) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    hv = instance.hypervisor_for(ctx, "fake")
    getattr(hv, how)(NAME)
    assert instance.instance_info(ctx, NAME, "fake", {})["state"] == \
        instance.HV_STATE_CODE_SHUTDOWN
    instance.instance_start(ctx, _inst(), [], False)
    info = instance.instance_info(ctx, NAME, "fake", {})
    assert info["state"] == instance.HV_STATE_CODE_RUNNING and info["hv_state"] == "running"
