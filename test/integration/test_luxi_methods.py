"""LUXI methods of the real ganeti-masterd not covered elsewhere:
QueryFields, every QueryConfigValues field, Query on the lock resource."""

from __future__ import annotations

import time

import pytest

from ganeti import errors
from test.integration.masterd_harness import MasterdHandle, start_masterd

DEADLINE = 30.0


@pytest.fixture
def masterd(tmp_path):
    handle = start_masterd(tmp_path, workers=4)
    try:
        yield handle
    finally:
        handle.close()


def test_query_fields_for_job_and_lock(masterd: MasterdHandle) -> None:
    for what in ("job", "lock"):
        every = masterd.call("QueryFields", [what, None])["fields"]
        names = [f["name"] for f in every]
        assert "name" in names or "id" in names, names
        some = masterd.call("QueryFields", [what, names[:2]])["fields"]
        assert [f["name"] for f in some] == names[:2]
        assert all({"name", "title", "kind", "doc"} <= set(f) for f in some)
    with pytest.raises(errors.GanetiError):
        masterd.call("QueryFields", ["no-such-resource", None])


def test_query_config_values_every_field(masterd: MasterdHandle) -> None:
    fields = ["cluster_name", "master_node", "drain_flag", "watcher_pause",
              "volume_group_name", "enabled_hypervisors", "default_hypervisor",
              "cluster_tags", "uuid", "software_version"]
    values = dict(zip(fields, masterd.call("QueryConfigValues", [fields])))
    assert values["cluster_name"] == "cluster.example.com"
    assert values["master_node"] == "node1.example.com"
    assert values["drain_flag"] is False and values["watcher_pause"] is None
    assert "volume_group_name" in values
    assert isinstance(values["enabled_hypervisors"], list)
    assert values["cluster_tags"] == []
    assert isinstance(values["uuid"], str) and values["uuid"]
    info = masterd.call("QueryClusterInfo", [])
    assert values["uuid"] == info.get("uuid", values["uuid"])
    with pytest.raises(errors.ParameterError):
        masterd.call("QueryConfigValues", [["no_such_value"]])


def test_query_lock_shows_owner_of_a_held_node_lock(masterd: MasterdHandle) -> None:
    job_id = masterd.call("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": 3,
                                          "on_master": True, "on_nodes": []}]])
    deadline = time.monotonic() + DEADLINE
    while masterd.call("QueryJobs", [[job_id], ["status"]])[0][0] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    res = masterd.call("Query", ["lock", ["name", "mode", "owner"], None])
    rows = {r[0][1]: r for r in res["data"]}
    assert "cluster/BGL" in rows, sorted(rows)
    bgl = rows["cluster/BGL"]
    assert bgl[1][1] == "shared" and bgl[2][1] == [f"job/{job_id}"]


def test_cancel_kill_interrupts_running_interruptible_delay(tmp_path) -> None:
    """A running job is not canceled by a plain CancelJob, but is killed with kill=True."""
    import time as _time

    from masterd_harness import start_masterd

    handle = start_masterd(tmp_path, workers=2)
    try:
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 600, "interruptible": True}
        job_id = handle.call("SubmitJob", [[op]])
        deadline = _time.monotonic() + 30
        while handle.call("QueryJobs", [[job_id], ["status"]])[0][0] != "running":
            assert _time.monotonic() < deadline, "job never started"
            _time.sleep(0.05)
        ok, _msg = handle.call("CancelJob", [job_id, False])
        assert not ok
        ok, msg = handle.call("CancelJob", [job_id, True])
        assert ok, msg
        while True:
            status = handle.call("QueryJobs", [[job_id], ["status"]])[0][0]
            if status in ("canceled", "error", "success"):
                break
            assert _time.monotonic() < deadline + 30, f"job still {status}"
            _time.sleep(0.05)
        assert status == "canceled"
    finally:
        handle.close()
