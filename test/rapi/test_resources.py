"""The RAPI resource table and its handlers, against a fake LUXI client."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import errors, opcodes
from ganeti.rapi import auth
from ganeti.rapi import resources as res
from ganeti.rapi.roles import Role

ADMIN = auth.Principal("root", Role.ADMIN, auth.VIA_BASIC)


def _fake(rows: dict[str, list[dict[str, Any]]] | None = None,
          outcome: tuple[str, list[Any]] | None = None) -> FakeLuxi:
    """A fake LUXI client: Query answers from canned rows (a filter matches the name
    exactly), a submission is job 42; with ``outcome`` (status, results) the
    submitted job has run: WaitForJobChange and QueryJobs give it."""
    tables = rows or {}

    def query(what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
        items = tables.get(what, [])
        if qfilter is not None:
            items = [i for i in items if i["name"] == qfilter[2]]
        return {"fields": [], "data": [[[0, i[f]] if f in i else [2, None] for f in fields]
                                       for i in items]}

    fake = FakeLuxi({"Query": query, "SubmitJob": 42, "QueryTags": ["t1"]})
    if outcome is not None:
        fake.answer_with(WaitForJobChange=[[outcome[0]], []], QueryJobs=[list(outcome)])
    return fake


def run(method: str, path: str, client: FakeLuxi, body: Any = None,
        query: dict[str, list[str]] | None = None) -> Any:
    route, args = res.match(method, path)
    ctx = res.Ctx(method=method, args=args, query=query or {}, body=body, client=client,
                  path=path, clock=lambda: 1000.0, principal=ADMIN)
    return res.dispatch(route, ctx)


@pytest.mark.parametrize("method, path", [("PUT", "/2/instances/x/startup"),
                                          ("GET", "/2/instances/x/console")],
                         ids=["job", "write-read"])
def test_a_write_without_a_principal_fails_closed(method, path):
    fake = _fake()
    route, args = res.match(method, path)
    ctx = res.Ctx(method=method, args=args, query={}, body=None, client=fake, path=path)
    with pytest.raises(errors.HttpError) as exc:
        res.dispatch(route, ctx)
    assert exc.value.status == 401 and fake.calls == []


def test_table_rows_are_unique_and_name_real_opcodes():
    keys = [(r.path, r.method) for r in res.ROUTES]
    assert len(keys) == len(set(keys))
    for route in res.ROUTES:
        if route.build is not None:
            assert route.opcode in opcodes.OP_REGISTRY, route
        assert route.needs_write == (route.method != "GET" and route.access not in ("read", "auth")
                                     or route.access == "write")
        assert route.needs_auth == (route.needs_write or route.access == "auth")


def test_write_rows_include_the_write_only_get():
    writes = {(r.path, r.method) for r in res.write_routes()}
    assert ("/2/jobs/{job_id}/wait", "GET") in writes
    assert ("/2/query/{resource}", "PUT") not in writes
    assert ("/2/instances", "POST") in writes and ("/2/instances", "GET") not in writes


def test_match_404_501():
    with pytest.raises(errors.HttpError) as exc:
        res.match("GET", "/2/nothing")
    assert exc.value.status == 404
    with pytest.raises(errors.HttpError) as exc:
        res.match("POST", "/2/info")
    assert exc.value.status == 501       # Ganeti's "not implemented" (HTTP would say 405)
    assert res.allowed_methods("/2/instances/x") == ["DELETE", "GET"]


def test_simple_reads():
    fake = _fake()
    assert run("GET", "/version", fake) == 2
    assert run("GET", "/", fake) is None
    assert run("GET", "/2/features", fake) == ["instance-create-reqv1",
                                               "instance-reinstall-reqv1", "node-evac-res1",
                                               "node-migrate-reqv1", "instance-multi-alloc"]


def test_node_listing_bulk_and_role():
    fake = _fake({"node": [{"name": "n1", "role": "M"}, {"name": "n2", "role": "C"}]})
    assert run("GET", "/2/nodes", fake) == [{"id": "n1", "uri": "/2/nodes/n1"},
                                            {"id": "n2", "uri": "/2/nodes/n2"}]
    bulk = run("GET", "/2/nodes", fake, query={"bulk": ["1"]})
    assert set(bulk[0]) == set(res.N_FIELDS) and bulk[0]["role"] == "M"
    assert bulk[0]["dtotal"] is None                # not NORMAL -> None, as Ganeti
    assert run("GET", "/2/nodes/n2/role", fake) == "master-candidate"
    with pytest.raises(errors.HttpError) as exc:
        run("GET", "/2/nodes/n9", fake)
    assert exc.value.status == 404


def test_bad_boolean_is_400():
    with pytest.raises(errors.HttpError) as exc:
        run("GET", "/2/nodes", _fake(), query={"bulk": ["yes"]})
    assert exc.value.status == 400


def test_set_role_builds_node_set_params():
    fake = _fake({"node": [{"name": "n2", "master_candidate": True, "offline": False,
                            "drained": False}]})
    assert run("PUT", "/2/nodes/n2/role", fake, body="drained", query={"force": ["1"]}) == 42
    (op,) = fake.submitted[0]
    # only what changes: the drain demotes the candidate by itself
    assert (op["OP_ID"], op["drained"], op.get("master_candidate"), op.get("offline"),
            op["force"], op["auto_promote"]) == ("OP_NODE_SET_PARAMS", True, None, None,
                                                 True, False)
    # the client library's SetNodeRole sends auto_promote as "auto-promote"
    run("PUT", "/2/nodes/n2/role", fake, body="offline", query={"auto-promote": ["1"]})
    (op,) = fake.submitted[1]
    assert (op["offline"], op["force"], op["auto_promote"]) == (True, False, True)
    for bad in ("master", "boss", 3):
        with pytest.raises(errors.HttpError):
            run("PUT", "/2/nodes/n2/role", fake, body=bad)
    assert len(fake.submitted) == 2


def test_instance_create_reqv1_aliases_reason_and_dry_run():
    fake = _fake()
    body = {"__version__": 1, "name": "i1", "os": "tinyos", "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": [], "name_check": False,
            "ip_check": False}
    assert run("POST", "/2/instances", fake, body=body,
               query={"dry-run": ["1"], "reason": ["why"]}) == 42
    (op,) = fake.submitted[0]
    assert op["instance_name"] == "i1" and op["os_type"] == "tinyos" and op["dry_run"]
    assert op["reason"] == [["gnt:client:rapi", "POST /2/instances", 1000 * 10**9],
                            ["gnt:user", "why", 1000 * 10**9]]


@pytest.mark.parametrize("body", [
    {"name": "i1"},                                     # no __version__
    {"__version__": 2, "name": "i1"},
    {"__version__": 1, "name": "i1", "os": "x", "os_type": "y"},   # alias twice
    [1, 2],
])
def test_instance_create_rejects(body):
    fake = _fake()
    with pytest.raises(errors.HttpError):
        run("POST", "/2/instances", fake, body=body)
    assert fake.submitted == []


def test_invalid_opcode_parameter_is_not_submitted():
    fake = _fake()
    with pytest.raises(errors.HttpError, match="no_such_param") as exc:
        run("PUT", "/2/instances/i1/modify", fake, body={"no_such_param": 1})
    assert exc.value.status == 400
    with pytest.raises(errors.ParameterError):
        run("PUT", "/2/instances/i1/rename", fake, body={"new_name": 5})
    assert fake.submitted == []


def test_reinstall_reqv1_is_one_job_of_three_opcodes():
    fake = _fake()
    run("POST", "/2/instances/i1/reinstall", fake, body={"os": "tinyos", "start": True})
    assert [o["OP_ID"] for o in fake.submitted[0]] == [
        "OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"]


@pytest.mark.parametrize("method, path, body, op_id", [
    ("POST", "/2/instances", {"__version__": 1, "name": "i1", "disk_template": "diskless",
                              "os": "tinyos", "osparams_private": {"token": "tok-1"},
                              "osparams_secret": {"key": "key-1"}}, "OP_INSTANCE_CREATE"),
    ("POST", "/2/instances/i1/reinstall", {"start": False, "osparams_private": {"token": "tok-1"},
                                           "osparams_secret": {"key": "key-1"}},
     "OP_INSTANCE_REINSTALL"),
    ("PUT", "/2/instances/i1/modify", {"osparams_private": {"token": "tok-1"}},
     "OP_INSTANCE_SET_PARAMS"),
], ids=["create", "reinstall", "modify"])
def test_private_and_secret_os_parameters_reach_the_opcode(method, path, body, op_id):
    fake = _fake()
    run(method, path, fake, body=body)
    op = [o for o in fake.submitted[0] if o["OP_ID"] == op_id][0]
    assert op["osparams_private"] == {"token": "tok-1"}
    assert op.get("osparams_secret") == body.get("osparams_secret")


def test_modify_converts_the_disk_template():
    fake = _fake()
    run("PUT", "/2/instances/i1/modify", fake,
        body={"disk_template": "drbd", "remote_node": "node2", "wait_for_sync": False})
    (op,) = fake.submitted[0]
    assert (op["OP_ID"], op["disk_template"], op["remote_node"], op["wait_for_sync"]) == \
        ("OP_INSTANCE_SET_PARAMS", "drbd", "node2", False)


def test_tags():
    fake = _fake()
    assert run("GET", "/2/instances/i1/tags", fake) == ["t1"]
    run("PUT", "/2/instances/i1/tags", fake, query={"tag": ["a", "b"]})
    assert fake.submitted[0][0]["tags"] == ["a", "b"]
    with pytest.raises(errors.HttpError):
        run("DELETE", "/2/tags", fake)              # no tag given


def test_listing_keys_and_node_aliases():
    fake = _fake({"group": [{"name": "default"}],
                     "node": [{"name": "n1", "sip": "192.0.2.1", "role": "M"}]})
    # groups are listed by "name" (the client library reads g["name"]), the rest by "id"
    assert run("GET", "/2/groups", fake) == [{"name": "default", "uri": "/2/groups/default"}]
    node = run("GET", "/2/nodes/n1", fake)
    assert node["secondary_ip"] == node["sip"] == "192.0.2.1"
    assert "hv_state" not in res.N_FIELDS and "custom_osparams" in res.I_FIELDS


def test_instance_beparams_memory_for_old_clients():
    inst = {"name": "i1", "beparams": {"maxmem": 256, "minmem": 128, "vcpus": 1}}
    fake = _fake({"instance": [inst]})
    assert run("GET", "/2/instances/i1", fake)["beparams"]["memory"] == 256
    (bulk,) = run("GET", "/2/instances", fake, query={"bulk": ["1"]})
    assert bulk["beparams"] == {"maxmem": 256, "minmem": 128, "vcpus": 1, "memory": 256}
    assert "memory" not in inst["beparams"]


def test_instance_modify_custom_aliases_and_delete_body():
    fake = _fake()
    run("PUT", "/2/instances/i1/modify", fake, body={"custom_beparams": {"vcpus": 2}})
    assert fake.submitted[0][0]["beparams"] == {"vcpus": 2}
    run("DELETE", "/2/instances/i1", fake, body={"shutdown_timeout": 5})
    op = fake.submitted[1][0]
    assert (op["shutdown_timeout"], op["ignore_failures"]) == (5, False)
    with pytest.raises(errors.HttpError):
        run("DELETE", "/2/instances/i1", fake, body={"ignore_failures": True})


def test_query_put_takes_qfilter():
    fake = FakeLuxi({"Query": {"fields": [], "data": []}})
    qfilter = ["=", "name", "n1"]
    run("PUT", "/2/query/node", fake, body={"fields": ["name"], "qfilter": qfilter,
                                            "filter": qfilter})
    run("PUT", "/2/query/node", fake, body={"fields": ["name"], "qfilter": qfilter})
    assert [a[2] for _m, a in fake.calls] == [qfilter, qfilter]
    with pytest.raises(errors.HttpError):
        run("PUT", "/2/query/node", fake, body={"fields": ["name"], "qfilter": qfilter,
                                                "filter": ["=", "name", "n2"]})


def test_group_modify_builds_group_set_params():
    fake = _fake()
    body = {"alloc_policy": "last_resort", "ipolicy": {"vcpu-ratio": 2}}
    assert run("PUT", "/2/groups/rack2/modify", fake, body=body) == 42
    (ops,) = fake.submitted
    assert ops[0]["OP_ID"] == "OP_GROUP_SET_PARAMS" and ops[0]["group_name"] == "rack2"
    assert ops[0]["alloc_policy"] == "last_resort" and ops[0]["ipolicy"] == {"vcpu-ratio": 2}
    # the names GET answers with stand for the opcode's (as in Ganeti)
    run("PUT", "/2/groups/rack2/modify", fake, body={"custom_ndparams": {"spindle_count": 2},
                                                     "custom_ipolicy": {}, "custom_diskparams": {}})
    op = fake.submitted[1][0]
    assert (op["ndparams"], op["ipolicy"], op["diskparams"]) == ({"spindle_count": 2}, {}, {})
    assert not any(key.startswith("custom_") for key in op)


def test_export_and_prepare_export():
    fake = _fake()
    run("PUT", "/2/instances/i1/export", fake, body={"destination": "n2", "shutdown": False})
    (op,) = fake.submitted[0]
    assert (op["OP_ID"], op["instance_name"], op["target_node"], op["shutdown"]) == \
        ("OP_BACKUP_EXPORT", "i1", "n2", False)
    run("PUT", "/2/instances/i1/prepare-export", fake, query={"mode": ["local"]})
    (op,) = fake.submitted[1]
    assert (op["OP_ID"], op["instance_name"], op["mode"]) == ("OP_BACKUP_PREPARE", "i1", "local")


# --- the OS image store ---------------------------------------------------------------------

def test_image_store_rows_build_gnt_os_images_opcodes():
    client = _fake()
    assert run("GET", "/2/os/images", client) == 42
    run("GET", "/2/os/images", client, query={"names": ["deb,cloud"]})
    run("POST", "/2/os/images", client, body={"name": "deb", "source": "http://h/deb.raw",
                                              "checksum": "sha256:" + "0" * 64})
    run("DELETE", "/2/os/images/deb", client)
    (every,), (named,), (add,), (remove,) = client.submitted
    assert (every["OP_ID"], every["names"]) == ("OP_OS_IMAGE_LIST", [])
    assert (named["OP_ID"], named["names"]) == ("OP_OS_IMAGE_LIST", ["deb", "cloud"])
    assert (add["OP_ID"], add["name"], add["source"], add["checksum"]) == \
        ("OP_OS_IMAGE_ADD", "deb", "http://h/deb.raw", "sha256:" + "0" * 64)
    assert (remove["OP_ID"], remove["name"]) == ("OP_OS_IMAGE_REMOVE", "deb")
    assert res.match("GET", "/2/os/images")[0].needs_write


@pytest.mark.parametrize("body, error, match", [
    ({"name": "deb"}, errors.ParameterError, "'source' is missing"),
    ({"name": "deb", "source": "/x", "size": 3}, errors.HttpError, "size"),
], ids=["no-source", "unknown-key"])
def test_image_store_add_refuses_a_bad_body_before_submitting(body, error, match):
    # both are a 400 answer (the server maps ParameterError to it); nothing is submitted
    client = _fake()
    with pytest.raises(error, match=match):
        run("POST", "/2/os/images", client, body=body)
    assert client.submitted == []


# --- node storage, disk grow, console ------------------------------------------------------

def test_node_storage_rows_build_ganetis_opcodes():
    client = _fake()
    assert run("GET", "/2/nodes/n1/storage", client,
               query={"storage_type": ["file"], "output_fields": ["name,free"]}) == 42
    run("PUT", "/2/nodes/n1/storage/modify", client,
        query={"storage_type": ["lvm-pv"], "name": ["/dev/sda"], "allocatable": ["0"]})
    run("PUT", "/2/nodes/n1/storage/repair", client,
        query={"storage_type": ["lvm-vg"], "name": ["xenvg"]})
    (query,), (modify,), (repair,) = client.submitted
    assert (query["OP_ID"], query["nodes"], query["storage_type"], query["output_fields"]) == \
        ("OP_NODE_QUERY_STORAGE", ["n1"], "file", ["name", "free"])
    assert (modify["OP_ID"], modify["name"], modify["changes"]) == \
        ("OP_NODE_MODIFY_STORAGE", "/dev/sda", {"allocatable": False})
    assert (repair["OP_ID"], repair["node_name"], repair["ignore_consistency"]) == \
        ("OP_REPAIR_NODE_STORAGE", "n1", False)
    route, _ = res.match("GET", "/2/nodes/n1/storage")
    assert route.needs_write


@pytest.mark.parametrize(("method", "path", "query", "match"), [
    ("GET", "/2/nodes/n1/storage", {"storage_type": ["file"]}, "output_fields"),
    ("PUT", "/2/nodes/n1/storage/modify", {"storage_type": ["file"]}, "'name'"),
    ("PUT", "/2/nodes/n1/storage/repair", {"name": ["x"]}, "storage_type"),
    ("GET", "/2/nodes/n1/storage", {"storage_type": ["zfs"], "output_fields": ["name"]},
     "storage_type"),
    ("POST", "/2/instances/i1/disk/x/grow", {}, "disk index"),
], ids=["no-fields", "no-name", "no-type", "bad-type", "bad-index"])
def test_node_storage_and_grow_refusals(method, path, query, match):
    client = _fake()
    with pytest.raises((errors.HttpError, errors.ParameterError), match=match):
        run(method, path, client, body={"amount": 1} if "grow" in path else None, query=query)
    assert client.submitted == []


def test_grow_disk_takes_the_index_from_the_path_and_the_rest_from_the_body():
    client = _fake()
    run("POST", "/2/instances/i1/disk/1/grow", client, body={"amount": 512, "absolute": False})
    ((op,),) = client.submitted
    assert (op["OP_ID"], op["instance_name"], op["disk"], op["amount"]) == \
        ("OP_INSTANCE_GROW_DISK", "i1", 1, 512)
    with pytest.raises(errors.HttpError, match="set by the resource"):
        run("POST", "/2/instances/i1/disk/1/grow", client, body={"amount": 1, "disk": 0})



def test_recreate_disks_takes_the_instance_from_the_path():
    client = _fake()
    run("POST", "/2/instances/i1/recreate-disks", client, body={"disks": [1]})
    ((op,),) = client.submitted
    assert (op["OP_ID"], op["instance_name"], op["disks"]) == \
        ("OP_INSTANCE_RECREATE_DISKS", "i1", [1])
    with pytest.raises(errors.HttpError):
        run("POST", "/2/instances/i1/recreate-disks", client, body={"bogus": 1})
CONSOLE = {"instance": "i1.example.com", "kind": "message", "message": "fake console"}


def test_console_answers_the_jobs_result_for_a_short_name():
    # (the fake matches names exactly: the short name is the one it knows)
    client = _fake({"instance": [{"name": "i1", "oper_state": True}]}, ("success", [CONSOLE]))
    assert run("GET", "/2/instances/i1/console", client) == CONSOLE
    ((op,),) = client.submitted
    assert op["OP_ID"] == "OP_INSTANCE_CONSOLE"
    assert res.match("GET", "/2/instances/i1/console")[0].needs_write


@pytest.mark.parametrize(("rows", "outcome", "status"), [
    ([{"name": "i1", "oper_state": False}], ("success", [CONSOLE]), 503),
    ([], ("success", [CONSOLE]), 404),
    ([{"name": "i1", "oper_state": True}],
     ("error", [["OpExecError", ["Instance i1 is not running"]]]), 503),
    ([{"name": "i1", "oper_state": True}],
     ("error", [["OpPrereqError", ["Instance 'i1' not known", "unknown_entity"]]]), 404),
], ids=["stopped", "unknown", "stopped-meanwhile", "removed-meanwhile"])
def test_console_errors(rows, outcome, status):
    client = _fake({"instance": rows}, outcome)
    with pytest.raises(errors.HttpError) as info:
        run("GET", "/2/instances/i1/console", client)
    assert info.value.status == status


def _submitted(fake: FakeLuxi) -> dict[str, Any]:
    (op,) = [args[0] for method, args in fake.calls if method == "SubmitJob"][-1]
    return op


@pytest.mark.parametrize("method, path, op_id, key", [
    ("POST", "/2/nodes/n1/evacuate", "OP_NODE_EVACUATE", "node_name"),
    ("PUT", "/2/instances/i1/change-group", "OP_INSTANCE_CHANGE_GROUP", "instance_name"),
    ("PUT", "/2/groups/g1/evacuate", "OP_GROUP_EVACUATE", "group_name"),
])
def test_relocation_rows_and_plan(method, path, op_id, key):
    fake = _fake()
    run(method, path, fake, body={"iallocator": "hail"})
    op = _submitted(fake)
    assert op["OP_ID"] == op_id and op[key] == path.split("/")[3] and op["iallocator"] == "hail"
    assert "plan_only" not in op
    run(method, path, fake, query={"plan": ["1"]})
    assert _submitted(fake)["plan_only"] is True


def test_node_migrate_and_multi_alloc_rows():
    fake = _fake()
    run("POST", "/2/nodes/n1/migrate", fake, body={"mode": "non-live"})
    assert _submitted(fake)["OP_ID"] == "OP_NODE_MIGRATE"
    spec = {"instance_name": "x", "disk_template": "diskless"}
    run("POST", "/2/instances-multi-alloc", fake, body={"instances": [spec]})
    op = _submitted(fake)
    assert op["OP_ID"] == "OP_INSTANCE_MULTI_ALLOC" and op["instances"] == [spec]


@pytest.mark.parametrize("method, path, op_id", [
    ("PUT", "/2/instances/i1/migrate", "OP_INSTANCE_MIGRATE"),
    ("POST", "/2/nodes/n1/evacuate", "OP_NODE_EVACUATE"),
    ("POST", "/2/nodes/n1/migrate", "OP_NODE_MIGRATE"),
])
def test_with_disks_reaches_the_opcode(method, path, op_id):
    fake = _fake()
    run(method, path, fake, body={"with_disks": True})
    op = _submitted(fake)
    assert op["OP_ID"] == op_id and op["with_disks"] is True
