"""Request bodies fill the row's own opcode only: allow-lists derived from the opcodes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import errors, luxi, opcodes
from ganeti.opcodes import base as opbase, upstream
from ganeti.rapi import auth, opinput
from ganeti.rapi import resources as res
from ganeti.rapi.roles import Role

#: a value for every path argument of the table
_ARGS = {"node": "n1", "instance": "i1", "group": "g1", "job_id": "1", "disk_index": "0",
         "resource": "instance"}


def _recording() -> FakeLuxi:
    """Records calls; a submission gets job 42, any other method an empty query answer."""
    empty = {"fields": [], "data": []}
    return FakeLuxi({**{name: empty for name in luxi.METHODS}, "SubmitJob": 42})


_ADMIN = auth.Principal("root", Role.ADMIN, auth.VIA_BASIC)


def _path(route: res.Route) -> str:
    return "/".join(_ARGS.get(s[1:-1], s) if s.startswith("{") else s
                    for s in route.path.split("/"))


def _run(route: res.Route, body: Any, client: FakeLuxi) -> Any:
    ctx = res.Ctx(method=route.method, args={k: v for k, v in _ARGS.items()
                                             if "{" + k + "}" in route.path},
                  query={}, body=body, client=client, path=_path(route), clock=lambda: 1.0,
                  principal=_ADMIN)
    return res.dispatch(route, ctx)


def _ids(route: res.Route) -> str:
    return f"{route.method} {route.path}"


@pytest.mark.parametrize("route", res.ROUTES, ids=_ids)
@pytest.mark.parametrize("body", [
    {"OP_ID": "OP_TEST_DELAY", "duration": 0},
    {"OP_ID": "OP_CLUSTER_DESTROY"},
    {"no_such_parameter": 1},
], ids=["delay", "destroy", "unknown"])
def test_no_row_accepts_op_id_or_unknown_keys(route, body):
    client = _recording()
    with pytest.raises(errors.HttpError) as exc:
        _run(route, body, client)
    assert exc.value.status == 400
    key = next(iter(body))
    if route.body.kind != "any":          # the role row wants a string: says so
        assert repr(key) in str(exc.value), str(exc.value)
    assert client.calls == []              # nothing asked, nothing submitted


def test_an_op_id_is_named_as_such():
    client = _recording()
    (route,) = [r for r in res.ROUTES if (r.method, r.path) == ("PUT", "/2/modify")]
    with pytest.raises(errors.HttpError, match="the resource chooses the opcode"):
        _run(route, {"OP_ID": "OP_TEST_DELAY", "duration": 0}, client)


def test_submitting_rows_derive_their_keys_from_their_opcode():
    for route in res.ROUTES:
        spec = route.body
        if spec.op_id is None:
            continue
        cls = opcodes.OP_REGISTRY[spec.op_id]
        fields = {f.name for f in dataclasses.fields(cls)}
        expected = ((fields | set(upstream.ACCEPTED_AT_DEFAULT.get(spec.op_id, {})))
                    - spec.fixed) | set(spec.aliases) | spec.extra
        assert spec.allowed() == expected, _ids(route)
        assert "OP_ID" not in spec.allowed()


def test_path_parameters_cannot_come_from_the_body():
    client = _recording()
    (route,) = [r for r in res.ROUTES if (r.method, r.path) == ("PUT", "/2/instances/"
                                                                "{instance}/modify")]
    with pytest.raises(errors.HttpError, match="'instance_name' .set by the resource"):
        _run(route, {"instance_name": "other"}, client)
    assert client.calls == []


#: opcodes Ganeti's RAPI offers (rlib2 of Ganeti 3.0), as far as they exist here
_UPSTREAM_RAPI = {
    "OP_BACKUP_EXPORT", "OP_BACKUP_PREPARE", "OP_CLUSTER_REDIST_CONF", "OP_CLUSTER_SET_PARAMS",
    "OP_GROUP_ADD", "OP_GROUP_ASSIGN_NODES", "OP_GROUP_EVACUATE", "OP_GROUP_REMOVE",
    "OP_GROUP_RENAME", "OP_GROUP_SET_PARAMS", "OP_INSTANCE_ACTIVATE_DISKS",
    "OP_INSTANCE_CHANGE_GROUP", "OP_INSTANCE_CONSOLE", "OP_INSTANCE_CREATE",
    "OP_INSTANCE_DEACTIVATE_DISKS", "OP_INSTANCE_FAILOVER", "OP_INSTANCE_GROW_DISK",
    "OP_INSTANCE_MIGRATE", "OP_INSTANCE_MULTI_ALLOC", "OP_INSTANCE_QUERY_DATA",
    "OP_INSTANCE_RECREATE_DISKS", "OP_INSTANCE_REPLACE_DISKS",
    "OP_INSTANCE_REBOOT", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_REMOVE", "OP_INSTANCE_RENAME",
    "OP_INSTANCE_SET_PARAMS", "OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_STARTUP",
    "OP_NETWORK_ADD", "OP_NETWORK_CONNECT", "OP_NETWORK_DISCONNECT", "OP_NETWORK_REMOVE",
    "OP_NETWORK_SET_PARAMS", "OP_NODE_EVACUATE", "OP_NODE_MIGRATE", "OP_NODE_MODIFY_STORAGE", "OP_NODE_POWERCYCLE",
    "OP_NODE_QUERY_STORAGE", "OP_NODE_SET_PARAMS", "OP_REPAIR_NODE_STORAGE", "OP_TAGS_DEL",
    "OP_TAGS_GET", "OP_TAGS_SET",
}


#: opcodes our RAPI offers beyond Ganeti's (doc/rapi.md): the OS image store's
_OURS = {"OP_OS_IMAGE_ADD", "OP_OS_IMAGE_LIST", "OP_OS_IMAGE_REMOVE"}


def test_only_opcodes_ganeti_offers_over_rapi_are_reachable():
    reachable = set().union(*(r.opcodes for r in res.ROUTES))
    assert reachable <= _UPSTREAM_RAPI | _OURS, sorted(reachable - _UPSTREAM_RAPI - _OURS)
    for kept_off in ("OP_CLUSTER_DESTROY", "OP_TEST_DELAY", "OP_TEST_JQUEUE",
                     "OP_TEST_ALLOCATOR", "OP_NODE_ADD", "OP_NODE_REMOVE"):
        assert kept_off not in reachable


def test_a_builder_cannot_submit_another_rows_opcode():
    row = res.Route("/x", "PUT", build=lambda c: [{"OP_ID": "OP_TEST_DELAY", "duration": 0}],
                    opcode="OP_CLUSTER_REDIST_CONF")
    client = _recording()
    with pytest.raises(errors.ProgrammerError):
        _run(row, None, client)
    assert client.submitted == []


def test_multi_alloc_entries_are_checked_like_creations():
    (route,) = [r for r in res.ROUTES if r.path == "/2/instances-multi-alloc"]
    client = _recording()
    good = {"name": "a", "os": "tinyos", "disk_template": "diskless"}
    _run(route, {"instances": [good]}, client)
    (op,) = client.submitted[0]
    assert op["instances"] == [{"instance_name": "a", "os_type": "tinyos",
                                "disk_template": "diskless"}]
    for bad in ({**good, "OP_ID": "OP_CLUSTER_DESTROY"}, {**good, "bogus": 1}):
        with pytest.raises(errors.HttpError, match=r"instances\[1\]") as exc:
            _run(route, {"instances": [good, bad]}, client)
        assert exc.value.status == 400
    assert len(client.submitted) == 1


@pytest.mark.parametrize("body", [None, {}])
def test_a_row_without_body_takes_an_empty_one(body):
    (route,) = [r for r in res.ROUTES if r.path.endswith("/startup")]
    client = _recording()
    assert _run(route, body, client) == 42


@pytest.mark.parametrize("body", [[1], "x", {"force": True}])
def test_a_row_without_body_refuses_one(body):
    (route,) = [r for r in res.ROUTES if r.path.endswith("/startup")]
    client = _recording()
    with pytest.raises(errors.HttpError) as exc:
        _run(route, body, client)
    assert exc.value.status == 400 and client.calls == []


def test_alias_and_target_together_are_refused():
    spec = opinput.Body(op_id="OP_GROUP_ADD", aliases={"name": "group_name"})
    assert spec.accept({"name": "g"}) == {"group_name": "g"}
    with pytest.raises(errors.HttpError, match="aliases"):
        spec.accept({"name": "g", "group_name": "h"})


def test_a_row_declaring_a_parameter_its_opcode_lacks_is_a_programmer_error():
    with pytest.raises(errors.ProgrammerError):
        opinput.Body(op_id="OP_GROUP_ADD", fixed=frozenset({"instance_name"}))
    with pytest.raises(errors.ProgrammerError):
        opinput.opcode_params("OP_NO_SUCH")


#: the keys Ganeti 3.0's client library (ganeti.rapi.client) puts in bodies, per row
_UPSTREAM_CLIENT_KEYS = {
    ("POST", "/2/instances"): {"__version__", "mode", "name", "disk_template", "disks",
                               "nics", "os", "pnode", "snode", "name_check", "ip_check",
                               "start", "beparams", "hvparams", "osparams", "iallocator"},
    ("POST", "/2/instances-multi-alloc"): {"instances", "iallocator"},
    ("DELETE", "/2/instances/{instance}"): {"shutdown_timeout"},
    ("PUT", "/2/instances/{instance}/modify"): {"beparams", "hvparams", "osparams", "disks",
                                                "nics"},
    ("POST", "/2/instances/{instance}/reboot"): {"shutdown_timeout"},
    ("PUT", "/2/instances/{instance}/shutdown"): {"timeout"},
    ("POST", "/2/instances/{instance}/reinstall"): {"os", "start", "osparams"},
    ("PUT", "/2/instances/{instance}/export"): {"mode", "destination", "shutdown",
                                                "remove_instance"},
    ("PUT", "/2/instances/{instance}/migrate"): {"mode", "cleanup", "target_node"},
    ("PUT", "/2/instances/{instance}/failover"): {"iallocator", "ignore_consistency",
                                                  "target_node"},
    ("PUT", "/2/instances/{instance}/rename"): {"new_name", "ip_check", "name_check"},
    ("POST", "/2/instances/{instance}/disk/{disk_index}/grow"): {"amount", "wait_for_sync"},
    ("POST", "/2/nodes/{node}/evacuate"): {"iallocator", "remote_node", "early_release",
                                           "mode"},
    ("POST", "/2/nodes/{node}/migrate"): {"mode", "iallocator", "target_node"},
    ("POST", "/2/groups"): {"name", "alloc_policy"},
    ("PUT", "/2/groups/{group}/rename"): {"new_name"},
    ("PUT", "/2/groups/{group}/assign-nodes"): {"nodes", "force"},
    ("GET", "/2/jobs/{job_id}/wait"): {"fields", "previous_job_info", "previous_log_serial"},
    ("PUT", "/2/query/{resource}"): {"fields", "qfilter", "filter"},
}


@pytest.mark.parametrize("key", sorted(_UPSTREAM_CLIENT_KEYS), ids=" ".join)
def test_the_keys_ganetis_client_sends_are_accepted(key):
    (route,) = [r for r in res.ROUTES if (r.method, r.path) == key]
    assert _UPSTREAM_CLIENT_KEYS[key] <= route.body.allowed()


def test_tag_rows_take_the_tags_again_as_their_body():
    """Ganeti's client (AddNodeTags) repeats the tags in the body; nothing else fits."""
    (route,) = [r for r in res.ROUTES if (r.method, r.path) == ("PUT", "/2/nodes/{node}/tags")]
    client = _recording()
    ctx = res.Ctx(method="PUT", args={"node": "n1"}, query={"tag": ["a", "b"]},
                  body=["b", "a"], client=client, path="/2/nodes/n1/tags", clock=lambda: 1.0,
                  principal=_ADMIN)
    assert res.dispatch(route, ctx) == 42
    assert client.submitted[0][0]["tags"] == ["a", "b"]
    for body in (["c"], [1], {"OP_ID": "OP_TEST_DELAY"}, "a"):
        with pytest.raises(errors.HttpError) as exc:
            res.dispatch(route, res.Ctx(method="PUT", args={"node": "n1"},
                                        query={"tag": ["a", "b"]}, body=body, client=client,
                                        path="/2/nodes/n1/tags", principal=_ADMIN))
        assert exc.value.status == 400
    assert len(client.submitted) == 1


def test_a_null_parameter_is_one_not_sent_unless_it_takes_null():
    # Ganeti's client sends every optional argument of CreateNetwork, null when not given
    body = opinput.Body(op_id="OP_NETWORK_ADD", aliases={"name": "network_name"})
    accepted = body.accept({"name": "n1", "network": "192.0.2.0/24", "tags": None,
                            "add_reserved_ips": None, "gateway": None})
    op = body.opcode(accepted, {})
    assert "tags" not in op and op["gateway"] is None and op["add_reserved_ips"] is None
    built = opbase.build(opcodes.OP_REGISTRY["OP_NETWORK_ADD"],
                          {k: v for k, v in op.items() if k != "OP_ID"})
    assert built.tags == [] and built.gateway is None


def test_a_null_upstream_parameter_accepted_at_its_default_is_dropped():
    body = opinput.Body(op_id="OP_INSTANCE_SET_PARAMS")
    op = body.opcode(body.accept({"instance_name": "i1", "ext_params": None,
                                  "pnode": None}), {})
    assert "ext_params" not in op        # default {}: null is "not sent"
    assert op["pnode"] is None           # default None: kept, and accepted at it
