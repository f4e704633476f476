"""tools/bench/bench_json.py: the documents it measures are built as the daemons build them."""

from __future__ import annotations

from ganeti import luxi, serializer
from tools.bench import bench_json


def test_the_query_reply_is_the_master_daemons_answer_for_every_instance(tmp_path) -> None:
    cfg = bench_json._config(str(tmp_path))
    frame = bench_json._query_reply(cfg, str(tmp_path))
    answer = serializer.loads(frame)
    assert answer["success"] is True
    result = answer["result"]
    assert [f["name"] for f in result["fields"]] == bench_json.QUERY_FIELDS
    assert len(result["data"]) == bench_json.INSTANCES
    # every field of every row answered from the configuration (status 0: normal)
    assert {status for row in result["data"] for status, _ in row} == {0}
    assert not frame.endswith(luxi.ETX)
