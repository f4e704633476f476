"""Query answers made as whole frames by the master: the plain job list
(``gnt-job list``) from cached row text, config-only instance queries kept
per committed configuration; byte for byte what the general query path
gives."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Collection

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fakes import make_config  # noqa: E402

from ganeti import constants, luxi, serializer  # noqa: E402
from ganeti.cmdlib import query as cmdlib_query  # noqa: E402
from ganeti.jqueue import storage as jstorage  # noqa: E402
from ganeti.query.answercache import AnswerCache  # noqa: E402
from ganeti.jqueue.summary import JobSummary  # noqa: E402
from ganeti.objects import NIC, Instance  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import masterd  # noqa: E402

UNARCHIVED = ["!", ["?", "archived"]]


def _query_frame(dispatcher: masterd.LuxiDispatcher, fields: list[str], qfilter) -> bytes:
    request = luxi.encode_message({"method": "Query", "args": ["job", fields, qfilter]})
    return dispatcher.handle(request[:-len(luxi.ETX)])


def _general_frame(ctx, fields: list[str], qfilter) -> bytes:
    return luxi.encode_response(True, cmdlib_query.run_query(ctx, "job", fields, qfilter))


def _wait_status(jq, ids: list[int], statuses: Collection[str]) -> None:
    for _ in range(2000):   # a bound on the polls, not a time
        rows = jq.query_jobs(ids, ["status"])
        if all(row[0] in statuses for row in rows):
            return
        time.sleep(0.01)
    raise AssertionError(f"jobs {ids} did not reach {sorted(statuses)}")


def _wait_finished(jq, ids: list[int]) -> None:
    _wait_status(jq, ids, constants.JOBS_FINALIZED)


def test_job_list_frame_is_the_general_answer(tmp_path) -> None:
    make_config(tmp_path, nodes=1)
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE, with_rpc=False)
    jq = ctx.jqueue
    try:
        dispatcher = masterd.LuxiDispatcher(ctx)
        fast = dispatcher._query_frame
        assert fast("job", ["id"], UNARCHIVED).startswith(b'{"success":true')   # empty queue
        assert fast("job", ["id"], UNARCHIVED) == _general_frame(ctx, ["id"], UNARCHIVED)
        jq.start()
        done = [jq.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) for _ in range(4)]
        failed = jq.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0,
                                    "on_nodes": ["no-such-node"]}])
        _wait_finished(jq, done + [failed])
        # a live job too (cancelled at the end)
        running = jq.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 60, "interruptible": True}])
        # compared only once it runs: queued -> running between two frames is a real change
        _wait_status(jq, [running], [constants.JOB_STATUS_RUNNING])
        for fields in (["id", "status", "summary"], ["id", "priority", "opstatus", "oppriority",
                                                      "received_ts", "start_ts", "end_ts",
                                                      "archived", "summary"], ["status", "id"]):
            first = _query_frame(dispatcher, fields, UNARCHIVED)
            assert first == fast("job", fields, UNARCHIVED)          # the fast path answered
            assert first == _general_frame(ctx, fields, UNARCHIVED)
            assert b'"error"' in first and b'"success"' in first
            assert _query_frame(dispatcher, fields, UNARCHIVED) == first   # from the cache
        jq.archive_job(done[0])
        fields = ["id", "status", "summary"]
        after = _query_frame(dispatcher, fields, UNARCHIVED)
        assert after == _general_frame(ctx, fields, UNARCHIVED)
        assert f"[[0,{done[0]}]".encode() not in after and f"[[0,{done[1]}]".encode() in after
        # every job, the archived ones too: the fast path as well, byte for byte
        for fields in (["id"], ["id", "status", "summary", "archived"]):
            every = fast("job", fields, None)
            assert every is not None and every == _general_frame(ctx, fields, None)
            assert f"[[0,{done[0]}]".encode() in every
            assert _query_frame(dispatcher, fields, None) == every
        # other queries take the general path (and still answer the same)
        for fields, qfilter in ((["id", "ops"], UNARCHIVED), (["id", "ops"], None),
                                (["id"], ["&", UNARCHIVED, ["==", "status", "error"]])):
            assert fast("job", fields, qfilter) is None
            assert _query_frame(dispatcher, fields, qfilter) == _general_frame(ctx, fields, qfilter)
        assert fast("instance", ["name"], UNARCHIVED) is None
        assert jq.cancel_job(running, kill=True)[0]     # interrupts its sleep at once
        _wait_finished(jq, [running])
    finally:
        jq.shutdown(timeout=10)
        ctx.replicator.stop(timeout=10)


def test_row_cache_reuses_rows_of_the_same_summary_only() -> None:
    one = JobSummary(1, "success", 0, ["success"], [0], ["TEST_DELAY"], [1, 0], [1, 1], [1, 2])
    two = JobSummary(2, "error", 0, ["error"], [0], ["TEST_DELAY"], None, None, None)
    cache = AnswerCache()
    text = cache.rows_json([one, None, two], ["id", "status"])
    assert text == '[[[0,1],[0,"success"]],[[0,2],[0,"error"]]]'
    assert cache.rows_json([one], ["id", "status"]) == '[[[0,1],[0,"success"]]]'
    # another summary object for id 1 (a live job summarized anew): its row is made again
    changed = JobSummary(1, "running", 0, ["running"], [0], ["TEST_DELAY"], [1, 0], [1, 1], None)
    assert cache.rows_json([changed], ["id", "status"]) == '[[[0,1],[0,"running"]]]'
    assert cache.rows_json([changed], ["status"]) == '[[[0,"running"]]]'


def _instance_frame(dispatcher: masterd.LuxiDispatcher, fields: list[str], qfilter) -> bytes:
    request = luxi.encode_message({"method": "Query", "args": ["instance", fields, qfilter]})
    return dispatcher.handle(request[:-len(luxi.ETX)])


def test_config_only_instance_query_frame_is_kept_per_committed_config(tmp_path) -> None:
    cfg = make_config(tmp_path, nodes=2)
    node = cfg.get_node_info_by_name(cfg.get_master_node_name()).uuid
    for idx in (2, 10, 1):
        cfg.add_instance(Instance(name=f"inst{idx}.example.com", uuid=str(uuid.uuid4()),
                                  primary_node=node, os="tinyos", hypervisor=constants.HT_FAKE,
                                  disk_template="diskless", nics=[NIC(mac=f"aa:00:00:00:00:{idx:02x}")],
                                  admin_state=constants.ADMINST_DOWN), [])
    paths = Paths(root=str(tmp_path / "root"))
    os.makedirs(paths.queue_dir, exist_ok=True)
    ctx = masterd.build_context(paths, workers=1, sync_mode=jstorage.SYNC_NONE, with_rpc=False)
    try:
        dispatcher = masterd.LuxiDispatcher(ctx)
        fields = ["name", "os", "pnode", "be/maxmem", "admin_state"]
        first = _instance_frame(dispatcher, fields, None)
        assert first == luxi.encode_response(True, cmdlib_query.run_query(ctx, "instance",
                                                                          fields, None))
        assert first.index(b"inst1.") < first.index(b"inst2.") < first.index(b"inst10.")
        assert _instance_frame(dispatcher, fields, None) is first          # kept
        named = _instance_frame(dispatcher, fields, ["=", "name", "inst2.example.com"])
        assert b"inst10" not in named and b"inst2." in named
        assert _instance_frame(dispatcher, fields, None) == first          # asked anew, same bytes
        inst = ctx.cfg.get_instance_info_by_name("inst2.example.com")
        inst.os = "otheros"
        ctx.cfg.update(inst)                                             # a new committed tree
        changed = _instance_frame(dispatcher, fields, None)
        assert changed != first and b'"otheros"' in changed
        assert changed == luxi.encode_response(True, cmdlib_query.run_query(ctx, "instance",
                                                                            fields, None))
        # live fields and bad arguments are not made here
        assert dispatcher._query_frame("instance", ["name", "status"], None) is None
        assert dispatcher._query_frame("instance", ["name"], ["=", "nosuch", 1]) is None
        assert dispatcher._query_frame("node", ["name"], None) is None
        unknown = serializer.loads(_instance_frame(dispatcher, ["name"], ["=", "nosuch", 1])[:-1])
        assert unknown["success"] is False
    finally:
        ctx.jqueue.shutdown(timeout=10)
        ctx.replicator.stop(timeout=10)
