"""Node side of the master role (ganeti.backend.fencing): epochs, vote answers, lease."""

from __future__ import annotations

import json
import os

import pytest

from ganeti import errors
from ganeti.backend import fencing
from ganeti.rpc import defs


def test_epoch_accepted_then_older_refused(ctx, caplog):
    assert fencing.check_epoch(ctx, "upload_file", 0, "node1")["epoch"] == 0
    assert fencing.check_epoch(ctx, "upload_file", 2, "node2")["master"] == "node2"
    assert fencing.check_epoch(ctx, "upload_file", 2, "node2")["epoch"] == 2
    with pytest.raises(errors.NotMasterError) as exc:
        fencing.check_epoch(ctx, "replicate_state", 1, "node1")
    msg = str(exc.value)
    assert msg.startswith(defs.FENCED_PREFIX)
    assert "epoch 1 (from node1)" in msg and "epoch 2 accepted from node2" in msg
    assert "replicate_state refused" in msg
    assert any("older than epoch 2" in r.getMessage() for r in caplog.records)
    # persisted for the next (forked) request
    assert fencing.read_state(ctx)["epoch"] == 2


def test_reservation_only_grows(ctx):
    fencing.master_lease(ctx, "node1", 0, 500, 20)
    fencing.master_lease(ctx, "node1", 0, 300, 10)
    assert fencing.read_state(ctx)["reserved_job_id"] == 500
    assert fencing.read_state(ctx)["reserved_serial"] == 20
    fencing.check_epoch(ctx, "upload_file", 1, "node2")
    with pytest.raises(errors.NotMasterError):
        fencing.master_lease(ctx, "node1", 0, 900, 90)  # an old master's renewal
    assert fencing.read_state(ctx)["reserved_job_id"] == 500


def test_corrupt_epoch_file_refuses(ctx):
    with open(fencing.epoch_file(ctx), "w") as fh:
        fh.write("{nope")
    with pytest.raises(errors.OpExecError):
        fencing.check_epoch(ctx, "upload_file", 5, "node1")


def _write_config(ctx, candidate: bool, serial: int = 7) -> None:
    cfg = {"serial_no": serial, "nodes": {"u1": {"name": ctx.hostname,
                                                  "master_candidate": candidate}}}
    with open(ctx.paths.config_file, "w") as fh:
        json.dump(cfg, fh)


def test_vote_info_candidate(ctx):
    _write_config(ctx, True)
    with open(ctx.paths.ssconf_file("master_node"), "w") as fh:
        fh.write("node9\n")
    with open(ctx.paths.queue_serial_file, "w") as fh:
        fh.write("42\n")
    for name in ("job-40", "job-41"):
        open(os.path.join(ctx.paths.queue_dir, name), "w").close()
    os.makedirs(os.path.join(ctx.paths.queue_archive_dir, "0"))
    open(os.path.join(ctx.paths.queue_archive_dir, "0", "job-3"), "w").close()
    fencing.master_lease(ctx, "node9", 3, 1000, 1007)
    info = fencing.master_vote_info(ctx)
    age = info.pop("contact_age")
    assert age is not None and 0 <= age < 60
    assert info == {"master": "node9", "candidate": True, "epoch": 3, "reserved_job_id": 1000,
                    "reserved_serial": 1007, "config_serial": 7, "job_id": 41,
                    "queue_serial": 42}


def test_contact_age_counts_from_the_last_lease(ctx):
    path = fencing.contact_file(ctx)
    assert fencing.master_vote_info(ctx)["contact_age"] is None
    fencing.master_lease(ctx, "node9", 3, 0, 0)
    with open(path) as fh:
        at = json.load(fh)["at"]
    assert fencing.contact_age(path, at + 7.5) == 7.5
    # a record from before a reboot (a later monotonic time): as old as the boot
    assert fencing.contact_age(path, at - 100.0) == at - 100.0
    # a refused renewal is no contact
    with pytest.raises(errors.NotMasterError):
        fencing.master_lease(ctx, "node8", 2, 0, 0)
    with open(path) as fh:
        assert json.load(fh)["at"] == at


def test_vote_info_archive_only(ctx):
    _write_config(ctx, True)
    for sub, name in (("0", "job-9"), ("1", "job-10005")):
        os.makedirs(os.path.join(ctx.paths.queue_archive_dir, sub), exist_ok=True)
        open(os.path.join(ctx.paths.queue_archive_dir, sub, name), "w").close()
    assert fencing.master_vote_info(ctx)["job_id"] == 10005


def test_vote_info_not_candidate(ctx):
    _write_config(ctx, False)
    info = fencing.master_vote_info(ctx)
    assert info["candidate"] is False and "config_serial" not in info
    os.unlink(ctx.paths.config_file)
    assert "job_id" not in fencing.master_vote_info(ctx)


def test_epoch_query_roundtrip():
    assert defs.parse_epoch_query("/x" + defs.epoch_query(5, "node 2")) == (5, "node 2")
    assert defs.parse_epoch_query("/x") == (0, "")
    assert defs.parse_epoch_query("/x?epoch=abc") == (0, "")
    assert defs.parse_epoch_query("/x?epoch=-4") == (0, "")


def test_fenced_calls_are_rows():
    assert defs.FENCED_CALLS <= set(defs.CALLS)
    assert "master_vote_info" not in defs.FENCED_CALLS


def test_one_epoch_one_master(ctx):
    fencing.check_epoch(ctx, "upload_file", 3, "node2")
    with pytest.raises(errors.NotMasterError, match="accepted from node2 already"):
        fencing.check_epoch(ctx, "upload_file", 3, "node3")
    assert fencing.check_epoch(ctx, "upload_file", 4, "node3")["master"] == "node3"


def test_leaving_the_cluster_forgets_the_epoch(ctx):
    from ganeti.backend import node
    fencing.check_epoch(ctx, "upload_file", 3, "node2")
    node.node_leave_cluster(ctx, False)
    assert fencing.read_state(ctx)["epoch"] == 0


def test_claim_goes_to_the_first_taker_of_a_round(ctx):
    # two takers saw epoch 0 and claim distinct epochs: the node promises the first
    assert fencing.master_claim(ctx, "node2", 65538, 0)["claim_master"] == "node2"
    with pytest.raises(errors.NotMasterError) as exc:
        fencing.master_claim(ctx, "node3", 65539, 0)
    assert str(exc.value).startswith(defs.FENCED_PREFIX)
    assert "epoch 65538 accepted from node2; claimed by another taker" in str(exc.value)
    # idempotent for the same taker; the running master is not fenced by a claim
    fencing.master_claim(ctx, "node2", 65538, 0)
    fencing.check_epoch(ctx, "jobqueue_update", 0, "node1")
    assert fencing.master_lease(ctx, "node1", 0, 10, 10)["epoch"] == 0
    # but another taker's new epoch below the claim is refused
    with pytest.raises(errors.NotMasterError, match="claimed by node2"):
        fencing.master_lease(ctx, "node3", 65537, 0, 0)
    assert fencing.master_lease(ctx, "node2", 65538, 0, 0)["epoch"] == 65538


def test_claim_refused_after_a_newer_epoch_and_claims_expire(ctx, monkeypatch):
    fencing.check_epoch(ctx, "upload_file", 65538, "node2")
    with pytest.raises(errors.NotMasterError, match="newer than 0 the taker saw"):
        fencing.master_claim(ctx, "node3", 65539, 0)
    fencing.master_claim(ctx, "node3", 131075, 65538)
    now = fencing.time.time()
    monkeypatch.setattr(fencing.time, "time", lambda: now + fencing.CLAIM_TTL + 1)
    # the claim of a taker that died expires: another taker may claim
    assert fencing.master_claim(ctx, "node1", 131073, 65538)["claim_master"] == "node1"


def test_claim_released_by_its_taker_or_ended_by_a_newer_epoch(ctx):
    fencing.master_claim(ctx, "node2", 65538, 0)
    fencing.master_claim(ctx, "node3", 0, 0)            # not node3's: nothing happens
    with pytest.raises(errors.NotMasterError, match="claimed by another taker"):
        fencing.master_claim(ctx, "node3", 65539, 0)
    fencing.master_claim(ctx, "node2", 0, 0)            # released
    fencing.master_claim(ctx, "node3", 65539, 0)
    # its own epoch accepted (the taker stopping the old master) keeps the claim:
    # a taker that saw that epoch in its vote is refused until the claim is released
    fencing.check_epoch(ctx, "node_stop_master", 65539, "node3")
    with pytest.raises(errors.NotMasterError, match="65539 accepted from node3; claimed by"):
        fencing.master_claim(ctx, "node4", 131076, 65539)
    fencing.master_lease(ctx, "node3", 65539, 0, 0)
    fencing.master_claim(ctx, "node3", 0, 0)            # the takeover is over
    fencing.master_claim(ctx, "node4", 131076, 65539)
    # a newer epoch accepted ends a claim
    fencing.check_epoch(ctx, "upload_file", 196612, "node1")
    fencing.master_claim(ctx, "node5", 262149, 196612)
