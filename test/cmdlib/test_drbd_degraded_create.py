"""A new mirror that does not come in sync fails its creation and leaves nothing
behind (doc/storage.md, "Node evacuation"), as Ganeti's "There are some degraded
disks for this instance": the instance create and a disk added to a drbd instance;
against a real ConfigWriter and fake nodes."""

from __future__ import annotations

from typing import Any

import pytest
from cmdlib.test_cmdlib_drbd import _drbd, denv  # noqa: F401 - denv: a fixture
from cmdlib.test_cmdlib_instance import _create, env  # noqa: F401 - env: a fixture

from ganeti import constants, errors, locking
from ganeti.cmdlib import drbd

_STANDALONE = {"is_degraded": True, "ldisk_status": "unknown",
               "drbd": {"cstate": "StandAlone"}}
_WAITING = {"is_degraded": True, "ldisk_status": "unknown",
            "drbd": {"cstate": "WFConnection"}}


@pytest.fixture
def fenv(denv: Any, monkeypatch: Any) -> Any:  # noqa: F811 - the imported fixture
    # no real pauses: the settle time passes at the second look
    monkeypatch.setattr(drbd, "SYNC_POLL_FIRST", 0.0)
    monkeypatch.setattr(drbd, "SYNC_SETTLE", 0.0)
    return denv


def test_a_create_whose_mirror_stays_standalone_fails_and_removes_it(fenv: Any) -> None:
    fenv.rpc.sync["node1"] = [_STANDALONE]
    with pytest.raises(errors.OpExecError,
                       match="There are some degraded disks for this instance"):
        _drbd(fenv, start=False)
    assert fenv.cfg.get_instance_info_by_name("inst1") is None
    assert sorted(e[1] for e in fenv.rpc.events if e[0] == "remove") == ["node1", "node2"]
    assert not fenv.rpc.disks["node1"] and not fenv.rpc.disks["node2"]
    assert "inst1" not in fenv.glm.names(locking.LEVEL_INSTANCE)
    # its port and minors are free again, the name too: a second try works
    assert fenv.cfg.allocate_drbd("uuid-node1", "uuid-node2") == \
        (constants.FIRST_DRBD_PORT, 0, 0)
    fenv.cfg.release_drbd([("uuid-node1", "uuid-node2", constants.FIRST_DRBD_PORT, 0, 0)])
    fenv.rpc.sync["node1"] = [{}]
    assert _drbd(fenv, start=False) == ["node1"]
    disk = fenv.cfg.get_instance_disks(fenv.cfg.get_instance_info_by_name("inst1").uuid)[0]
    assert disk.logical_id[2:5] == [constants.FIRST_DRBD_PORT, 0, 0]


def test_a_create_whose_mirror_is_connected_but_not_resyncing_fails(fenv: Any) -> None:
    fenv.rpc.sync["node1"] = [{"is_degraded": True, "ldisk_status": "unknown"}]
    with pytest.raises(errors.OpExecError, match="degraded disks"):
        _drbd(fenv, start=False)
    assert fenv.cfg.get_instance_info_by_name("inst1") is None


def test_a_mirror_that_connects_late_is_waited_for(fenv: Any) -> None:
    """Waiting for the peer, past the settle time, is not degraded: the create goes on."""
    fenv.rpc.sync["node1"] = [_WAITING] * 5 + [
        {"sync_percent": 40.0, "is_degraded": True, "drbd": {"cstate": "SyncSource"}}, {}]
    assert _drbd(fenv, start=False) == ["node1"]
    assert fenv.cfg.get_instance_info_by_name("inst1") is not None
    assert not any("not in sync" in f for f in fenv.feedback)


def test_a_mirror_that_never_connects_fails_the_create_after_the_stall_time(
        fenv: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(drbd, "SYNC_STALL", 0.0)
    fenv.rpc.sync["node1"] = [_WAITING]
    with pytest.raises(errors.OpExecError, match="degraded disks"):
        _drbd(fenv, start=False)
    assert not fenv.rpc.disks["node1"] and not fenv.rpc.disks["node2"]
    assert fenv.cfg.get_instance_info_by_name("inst1") is None


def test_no_wait_for_sync_keeps_a_mirror_that_did_not_connect(fenv: Any) -> None:
    fenv.rpc.sync["node1"] = [_STANDALONE]
    _drbd(fenv, start=False, wait_for_sync=False)
    assert fenv.cfg.get_instance_info_by_name("inst1") is not None


def test_a_disk_added_whose_mirror_stays_standalone_is_removed_again(fenv: Any) -> None:
    _drbd(fenv, start=False)
    inst = fenv.cfg.get_instance_info_by_name("inst1")
    before = list(inst.disks)
    port = fenv.cfg.get_instance_disks(inst.uuid)[0].logical_id[2]
    fenv.rpc.events.clear()
    fenv.rpc.sync["node1"] = [_STANDALONE]
    with pytest.raises(errors.OpExecError, match="new disk 1 did not come in sync"):
        fenv.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                 disks=[["add", -1, {"size": 64}]])
    inst = fenv.cfg.get_instance_info_by_name("inst1")
    assert inst.disks == before
    assert sorted(e[1] for e in fenv.rpc.events if e[0] == "remove") == ["node1", "node2"]
    # the first disk is still there on both nodes, the new one on neither
    assert fenv.rpc.disks["node1"] == fenv.rpc.disks["node2"] == set(before)
    # the failed disk's port is free again
    assert fenv.cfg.allocate_drbd("uuid-node1", "uuid-node2")[0] == port + 1
