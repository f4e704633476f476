"""gnt-group on a real 3-node virtual cluster: add, list, assign-nodes, rename, tags, remove."""

from __future__ import annotations

import pytest
from vcluster_harness import VirtualCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

N3 = "node3.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcg"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def _groups(vc) -> dict[str, list[str]]:
    out = vc.ok("gnt-group", "list", "--no-headers", "--separator=|", "-o",
                "name,node_cnt,alloc_policy")
    return {row.split("|")[0]: row.split("|")[1:] for row in out.splitlines()}


def test_group_lifecycle(vc):
    assert _groups(vc) == {"default": ["3", "preferred"]}
    vc.ok("gnt-group", "add", "--alloc-policy", "last_resort", "spare")
    assert _groups(vc)["spare"] == ["0", "last_resort"]
    vc.ok("gnt-group", "assign-nodes", "spare", N3)
    assert _groups(vc) == {"default": ["2", "preferred"], "spare": ["1", "last_resort"]}
    node_group = vc.ok("gnt-node", "list", "--no-headers", "-o", "group", N3).strip()
    assert node_group == "spare"
    res = vc.run("gnt-group", "remove", "spare")
    assert res.returncode == 1 and "spare" in res.stderr    # not empty: refused
    vc.ok("gnt-group", "rename", "spare", "reserve")
    vc.ok("gnt-group", "add-tags", "reserve", "rack:b2")
    assert vc.ok("gnt-group", "list-tags", "reserve").split() == ["rack:b2"]
    vc.ok("gnt-group", "assign-nodes", "default", N3)
    vc.ok("gnt-group", "remove", "reserve")
    assert _groups(vc) == {"default": ["3", "preferred"]}


def test_bad_input_changes_nothing(vc):
    res = vc.run("gnt-group", "add", "--alloc-policy", "sometimes", "x")
    assert res.returncode != 0 and "sometimes" in res.stderr
    res = vc.run("gnt-group", "rename", "nosuch", "other")
    assert res.returncode == 1 and "nosuch" in res.stderr
    assert "name" in vc.ok("gnt-group", "list-fields")
    assert _groups(vc) == {"default": ["3", "preferred"]}
