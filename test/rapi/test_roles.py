"""RAPI roles: the role table derived from the rows' opcodes, and the check of built opcodes."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import errors
from ganeti.opcodes import wire
from ganeti.rapi import auth, roles
from ganeti.rapi import resources as res
from ganeti.rapi.roles import Role


def _row(method: str, path: str) -> res.Route:
    return res.match(method, path)[0]


def test_every_row_has_a_role_and_writes_without_opcode_state_theirs():
    for route in res.ROUTES:
        role = roles.row_role(route)            # raises for an unknown role
        if route.needs_write:
            assert role >= Role.OPERATOR, route
            if not route.opcodes:
                assert route.role, f"{route.method} {route.path}: state its role="
        elif not route.role:
            assert role == Role.READONLY, route


@pytest.mark.parametrize("method, path, role", [
    ("GET", "/2/instances", Role.READONLY),
    ("PUT", "/2/query/node", Role.READONLY),
    ("PUT", "/2/instances/x/startup", Role.OPERATOR),
    ("PUT", "/2/instances/x/shutdown", Role.OPERATOR),
    ("POST", "/2/instances/x/reboot", Role.OPERATOR),
    ("PUT", "/2/instances/x/migrate", Role.OPERATOR),
    ("PUT", "/2/instances/x/failover", Role.OPERATOR),
    ("PUT", "/2/instances/x/tags", Role.OPERATOR),
    ("PUT", "/2/nodes/n/role", Role.OPERATOR),       # drain/undrain; judged again once built
    ("DELETE", "/2/jobs/1", Role.OPERATOR),
    ("GET", "/2/jobs/1/wait", Role.OPERATOR),
    ("GET", "/2/instances/x/console", Role.OPERATOR),
    ("POST", "/2/instances", Role.ADMIN),
    ("DELETE", "/2/instances/x", Role.ADMIN),
    ("PUT", "/2/instances/x/modify", Role.ADMIN),
    ("POST", "/2/instances/x/reinstall", Role.ADMIN),  # its job also starts and stops
    ("PUT", "/2/modify", Role.ADMIN),
    ("POST", "/2/nodes/n/powercycle", Role.ADMIN),
    ("POST", "/2/filters", Role.ADMIN),
    ("POST", "/2/tokens", Role.READONLY),
], ids=lambda v: v.label if isinstance(v, Role) else v)
def test_row_roles(method, path, role):
    assert roles.row_role(_row(method, path)) == role


def test_a_new_write_row_is_an_admins_without_an_entry():
    new = res.Route("/2/new-thing", "POST", build=lambda c: [], opcode=wire.OP_TEST_DELAY)
    assert roles.row_role(new) == Role.ADMIN
    assert roles.row_role(res.Route("/2/x", "POST", read=lambda c: None)) == Role.ADMIN


def test_an_unknown_role_on_a_row_is_a_programmer_error():
    with pytest.raises(errors.ProgrammerError, match="role"):
        res.Route("/2/x", "POST", read=lambda c: None, role="superuser")


@pytest.mark.parametrize("op, role", [
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "drained": True,
      "force": False, "reason": [], "auto_promote": True}, Role.OPERATOR),
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "drained": False}, Role.OPERATOR),
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "drained": True,
      "master_candidate": False}, Role.ADMIN),                  # a demotion
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "drained": False,
      "offline": False}, Role.ADMIN),                           # brings a node online
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "offline": True}, Role.ADMIN),
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "master_candidate": True},
     Role.ADMIN),
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n", "drained": True,
      "ndparams": {}}, Role.ADMIN),
    ({"OP_ID": wire.OP_NODE_SET_PARAMS, "node_name": "n"}, Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_STARTUP, "instance_name": "x"}, Role.OPERATOR),
    ({"OP_ID": wire.OP_INSTANCE_STARTUP, "instance_name": "x",
      "ignore_offline_nodes": True}, Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_SHUTDOWN, "instance_name": "x",
      "ignore_offline_nodes": False, "admin_state_source": None}, Role.OPERATOR),
    ({"OP_ID": wire.OP_INSTANCE_SHUTDOWN, "instance_name": "x",
      "admin_state_source": "admin"}, Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_FAILOVER, "instance_name": "x",
      "ignore_consistency": True}, Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_MIGRATE, "instance_name": "x", "ignore_ipolicy": True},
     Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_MIGRATE, "instance_name": "x", "ignore_hvversions": True},
     Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_MIGRATE, "instance_name": "x", "ignore_ipolicy": False,
      "cleanup": True}, Role.OPERATOR),
    ({"OP_ID": wire.OP_NODE_MIGRATE, "node_name": "n", "ignore_ipolicy": True}, Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_REBOOT, "instance_name": "x",
      "ignore_secondaries": True}, Role.ADMIN),
    ({"OP_ID": wire.OP_TAGS_SET, "kind": "instance", "name": "x", "tags": ["env:prod"]},
     Role.OPERATOR),
    ({"OP_ID": wire.OP_TAGS_SET, "kind": "instance", "name": "x",
      "tags": ["env:prod", "owner:olga"]}, Role.ADMIN),
    ({"OP_ID": wire.OP_TAGS_DEL, "kind": "instance", "name": "x", "tags": ["owner:bob"]},
     Role.ADMIN),
    ({"OP_ID": wire.OP_INSTANCE_REMOVE, "instance_name": "x"}, Role.ADMIN),
    ({"OP_ID": "OP_SOMETHING_NEW"}, Role.ADMIN),
], ids=["drain", "undrain", "drain+demote", "undrain+online", "offline", "promote",
        "drain+ndparams", "no-change", "startup", "startup-ignore-offline", "shutdown",
        "shutdown-admin-source", "failover-ignore-consistency", "migrate-ignore-ipolicy",
        "migrate-ignore-hvversions", "migrate-cleanup", "node-migrate-ignore-ipolicy",
        "reboot-ignore-secondaries", "tag", "add-owner-tag", "remove-owner-tag", "remove",
        "unknown"])
def test_opcode_roles(op, role):
    assert roles.opcode_role(op) == role


def _node(name: str, *, master_candidate: bool = True, offline: bool = False,
          drained: bool = False) -> Any:
    """A master answering a node query about ``name`` with these flags."""
    values = {"name": name, "master_candidate": master_candidate, "offline": offline,
              "drained": drained}
    return lambda what, fields, qfilter: {"fields": [], "data": [
        [[0, values[f]] for f in fields]]}


def _ctx(method: str, path: str, principal: auth.Principal | None, body: Any = None,
         tags: list[str] | None = None, node: Any = None) -> tuple[res.Route, res.Ctx, FakeLuxi]:
    route, args = res.match(method, path)
    fake = FakeLuxi({"SubmitJob": 42, "QueryTags": tags or [],
                     "Query": node if node is not None else _node("n1")})
    return route, res.Ctx(method=method, args=args, query={}, body=body, client=fake,
                          path=path, clock=lambda: 1000.0, principal=principal), fake


OPERATOR = auth.Principal("olga", Role.OPERATOR, auth.VIA_BASIC)


@pytest.mark.parametrize("role, flags, status", [
    ("drained", {}, None),                                  # a candidate: demoted by the drain
    ("regular", {"drained": True, "master_candidate": False}, None),
    ("drained", {"offline": True, "master_candidate": False}, 403),   # brings it online
    ("regular", {"master_candidate": True}, 403),           # a demotion
    ("offline", {}, 403),
    ("master-candidate", {"drained": True, "master_candidate": False}, 403),
], ids=["drain", "undrain", "drain-offline", "demote", "offline", "promote"])
def test_operator_drains_but_does_not_offline_a_node(role, flags, status):
    route, ctx, fake = _ctx("PUT", "/2/nodes/n1/role", OPERATOR, body=role,
                            node=_node("n1", **flags))
    if status is None:
        assert res.dispatch(route, ctx) == 42
        ((op,),) = fake.submitted
        assert op["drained"] is (role == "drained")
        assert op.get("master_candidate") is None and op.get("offline") is None
    else:
        with pytest.raises(errors.HttpError) as exc:
            res.dispatch(route, ctx)
        assert exc.value.status == 403 and "needs admin" in str(exc.value)
        assert fake.submitted == []


def _owner_case(path: str, tags: list[str], method: str = "PUT",
                body: Any = None) -> tuple[Any, FakeLuxi]:
    owner = auth.Principal("olga", Role.OPERATOR, auth.VIA_BASIC, owner_only=True)
    route, ctx, fake = _ctx(method, path, owner, body=body, tags=tags)
    try:
        return res.dispatch(route, ctx), fake
    except errors.HttpError as exc:
        return exc.status, fake


def test_owner_limited_operator_acts_on_its_tagged_instances_only():
    assert _owner_case("/2/instances/web/startup", ["owner:olga"])[0] == 42
    status, fake = _owner_case("/2/instances/web/startup", ["owner:bob"])
    assert status == 403 and fake.submitted == []
    assert _owner_case("/2/nodes/n1/role", [], body="drained")[0] == 403


def test_owner_limited_operator_cannot_change_owner_tags():
    route, ctx, fake = _ctx("PUT", "/2/instances/web/tags",
                            auth.Principal("olga", Role.OPERATOR, auth.VIA_BASIC, True),
                            tags=["owner:olga"])
    ctx.query = {"tag": ["owner:olga2"]}
    with pytest.raises(errors.HttpError) as exc:
        res.dispatch(route, ctx)
    assert exc.value.status == 403 and "owner:" in str(exc.value)
    ctx.query = {"tag": ["env:prod"]}
    assert res.dispatch(route, ctx) == 42



def test_an_instance_name_in_a_refusal_is_quoted_as_a_literal():
    """The URI layer refuses control characters; the refusal (logged) quotes names anyway."""
    route, ctx, fake = _ctx("PUT", "/2/instances/web/startup",
                            auth.Principal("olga", Role.OPERATOR, auth.VIA_BASIC, True),
                            tags=[])
    ctx.args["instance"] = "web\nRefused PUT"
    with pytest.raises(errors.HttpError) as exc:
        res.dispatch(route, ctx)
    assert "'web\\nRefused PUT'" in str(exc.value) and "\n" not in str(exc.value)
    assert fake.submitted == []
