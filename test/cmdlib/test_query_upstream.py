"""Ganeti 3.0's query2 field names on our resources (ganeti/cmdlib/query_upstream.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config  # noqa: E402

from ganeti import constants  # noqa: E402
from ganeti.cmdlib import query as cq  # noqa: E402

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_query_fields.py")
RESOURCES = ("instance", "node", "group", "cluster", "os", "job")


def _ctx(tmp_path):
    cfg = make_config(tmp_path)
    return make_cluster_context(tmp_path, cfg, FakeRpc(cfg))


def test_aliases_parameters_and_unavailable_fields(tmp_path) -> None:
    ctx = _ctx(tmp_path)
    res = cq.run_query(ctx, "cluster", ["cluster_name", "name", "vcs_version"], None)
    assert [f["kind"] for f in res["fields"]] == ["text", "text", "text"]
    (row,) = res["data"]
    assert row[0] == row[1] == [0, "cluster.example.com"]
    assert row[2] == [constants.RS_UNAVAIL, None]
    res = cq.run_query(ctx, "node", ["name", "ndp/spindle_count", "ndp/cpu_speed", "hv_state"],
                       None)
    assert res["fields"][2]["kind"] == constants.QFT_FLOAT
    for row in res["data"]:
        assert row[1][0] == 0 and isinstance(row[1][1], int)
        assert row[3] == [constants.RS_UNAVAIL, None]
    fields = {f["name"]: f for f in cq.run_query_fields("instance", None)["fields"]}
    assert fields["be/memory"]["kind"] == fields["be/maxmem"]["kind"]
    assert fields["be/memory"]["title"] == "ConfigMaxMem"
    assert fields["hv/vnc_tls"]["kind"] == "bool"


def _upstream_fields() -> dict[str, Any]:
    if not os.path.exists("/usr/share/ganeti/3.0/ganeti/query.py"):
        if os.environ.get("GANETI_TEST_REQUIRE_UPSTREAM") == "1":
            pytest.fail("ganeti-3.0 is not installed (make compat-deps)")
        pytest.skip("ganeti-3.0 is not installed (make compat-deps)")
    res = subprocess.run(["/usr/bin/python3", "-E", "-s", DRIVER], capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    result: dict[str, Any] = json.loads(res.stdout)
    return result


@pytest.mark.parametrize("what", ["instance", "node", "group", "job", "os", "export"])
def test_the_full_field_list_is_upstreams_in_its_order(what: str) -> None:
    # Ganeti's QA (GenericQueryFieldsTest): `gnt-* list-fields` lists exactly
    # Ganeti's fields in NiceSort order; our extensions are answered when named
    upstream = _upstream_fields()
    ours = [f["name"] for f in cq.run_query_fields(what, None)["fields"]]
    assert ours == upstream["nicesorted"][what]


def test_our_extensions_are_answered_when_named() -> None:
    names = ["hv_jobs", "disk.modes", "disk.mode/0", "hv/migration_mode", "hv/firmware", "hv/tpm"]
    fields = cq.run_query_fields("instance", names)["fields"]
    assert [f["name"] for f in fields] == names and "unknown" not in {f["kind"] for f in fields}
    assert cq.run_query_fields("group", ["networks"])["fields"][0]["kind"] == "other"


def test_every_upstream_field_is_known_with_its_kind() -> None:
    upstream = _upstream_fields()
    for what in RESOURCES:
        ours = {f["name"]: f for f in cq.run_query_fields(what, None)["fields"]}
        missing = sorted(set(upstream[what]) - set(ours))
        assert missing == [], (what, missing)
        kinds = {n: (ours[n]["kind"], k) for n, (_t, k) in upstream[what].items()
                 if ours[n]["kind"] != k}
        assert kinds == {}, (what, kinds)
