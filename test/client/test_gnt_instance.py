"""gnt-instance argument parsing and verbs against a fake LUXI client."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import errors
from ganeti.client import gnt_instance, gnt_os


def _client(query_result: Any = None) -> FakeLuxi:
    """A fake LUXI client; ``Query`` answers ``query_result`` when given."""
    return FakeLuxi({} if query_result is None else {"Query": query_result})


def _last_query(cl: FakeLuxi) -> tuple[Any, ...]:
    return tuple(cl.args_of("Query")[-1])


def test_parse_helpers() -> None:
    assert gnt_instance.parse_kv("a=1,no_b,-c") == {"a": "1", "b": False, "c": "default"}
    assert gnt_instance.parse_indexed(["1:size=2", "0:size=1"], "disk") == \
        [{"size": "1"}, {"size": "2"}]
    with pytest.raises(errors.OpPrereqError):
        gnt_instance.parse_indexed(["1:size=2"], "disk")
    assert gnt_instance.parse_mods(["add:size=1G", "0:mode=ro", "remove"], "disk") == \
        [["add", -1, {"size": 1024}], ["modify", 0, {"mode": "ro"}], ["remove", -1, {}]]
    assert gnt_instance.parse_mods(["1:modify,mac=aa:00:00:00:00:01", "0:remove",
                                    "2:add,link=br0"], "NIC") == \
        [["modify", 1, {"mac": "aa:00:00:00:00:01"}], ["remove", 0, {}],
         ["add", 2, {"link": "br0"}]]
    with pytest.raises(errors.OpPrereqError, match="more than one"):
        gnt_instance.parse_mods(["0:modify,remove"], "NIC")
    # as Ganeti's (its QA's TestInstanceDeviceNames): a name or UUID instead of an index
    assert gnt_instance.parse_mods(["test_device:remove", "data:name=renamed"], "disk") == \
        [["remove", "test_device", {}], ["modify", "data", {"name": "renamed"}]]
    with pytest.raises(errors.OpPrereqError, match="Invalid disk modification"):
        gnt_instance.parse_mods([":remove"], "disk")
    assert gnt_instance.parse_hv("fake:migration_mode=non-live") == \
        ("fake", {"migration_mode": "non-live"})


def test_add_submits_create_opcode(capsys: Any) -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands,
                              ["add", "-t", "file", "--disk", "0:size=1G,mode=rw", "-o",
                               "tinyos", "-n", "node1", "-B", "maxmem=256M", "--no-start",
                               "--submit", "inst1"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert op["OP_ID"] == "OP_INSTANCE_CREATE" and op["instance_name"] == "inst1"
    assert op["disks"] == [{"size": 1024, "mode": "rw"}] and op["start"] is False
    assert op["beparams"] == {"maxmem": "256M"} and op["pnode"] == "node1"
    assert op["name_check"] is True and op["ip_check"] is True
    assert "JobID: 1" in capsys.readouterr().err


def test_modify_new_primary_reaches_the_opcode() -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands, ["modify", "--new-primary=node2",
                                                      "--submit", "inst1"],
                              prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0 and cl.submitted[0][0]["pnode"] == "node2"


def test_recreate_disks_sends_changed_parameters() -> None:
    # as Ganeti's (its QA's TestRecreateDisks): --disk=N:size=..,spindles=..
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands,
                              ["recreate-disks", "--disk=0:size=1G,spindles=2", "--disk", "1",
                               "--submit", "inst1"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert op["OP_ID"] == "OP_INSTANCE_RECREATE_DISKS"
    assert op["disks"] == [[0, {"size": 1024, "spindles": 2}], 1] and "iallocator" not in op
    rc = climain.generic_main(gnt_instance.commands, ["recreate-disks", "-I", ".", "--submit",
                                                      "inst1"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0 and cl.submitted[1][0]["iallocator"] == "."


@pytest.mark.parametrize("argv", [
    ["add", "-t", "diskless", "-o", "tinyos", "-n", "node1", "--net", "0:ip=auto",
     "--no-name-check", "--no-ip-check", "--submit", "inst1.example.com"],
    ["rename", "--no-name-check", "--no-ip-check", "--submit", "inst1.example.com",
     "inst2.example.com"],
], ids=["add", "rename"])
def test_no_name_and_ip_check_flags_reach_the_opcode(argv: list[str]) -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands, argv, prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert op["name_check"] is False and op["ip_check"] is False
    if argv[0] == "add":
        assert op["nics"] == [{"ip": "auto"}]    # resolved (or refused) by the master


def test_add_requires_template() -> None:
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands, ["add", "inst1"], prog="gnt-instance",
                              client_factory=_client)
    assert rc == 2


def test_list_default_fields(capsys: Any) -> None:
    from ganeti.cli import main as climain
    fields = [{"name": n, "title": t, "kind": k, "doc": "d"} for n, t, k in [
        ("name", "Instance", "text"), ("hypervisor", "Hypervisor", "text"),
        ("os", "OS", "text"), ("pnode", "Primary_node", "text"),
        ("status", "Status", "text"), ("oper_ram", "Memory", "unit")]]
    data = [[[0, "i1"], [0, "fake"], [0, "tinyos"], [0, "node1"], [0, "ADMIN_down"], [3, None]]]
    cl = _client({"fields": fields, "data": data})
    rc = climain.generic_main(gnt_instance.commands, ["list"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["Instance", "Hypervisor", "OS", "Primary_node", "Status", "Memory"]
    assert out[1].split() == ["i1", "fake", "tinyos", "node1", "ADMIN_down", "-"]
    assert _last_query(cl)[1] == gnt_instance.LIST_DEFAULT_FIELDS


def test_gnt_os_diagnose_reports_missing(capsys: Any) -> None:
    from ganeti.cli import main as climain
    row = [[0, "x"], [0, False], [0, []], [0, []], [0, [20]],
           [0, {"node1": [["/p", True, "", [], [], [20]]], "node2": []}], [0, False], [0, False]]
    cl = _client({"fields": [], "data": [row]})
    rc = climain.generic_main(gnt_os.commands, ["diagnose"], prog="gnt-os",
                              client_factory=lambda: cl)
    assert rc == 1
    assert "node2, status: missing" in capsys.readouterr().out


def test_shutdown_by_tags_needs_force_multiple(capsys: Any) -> None:
    from ganeti.cli import main as climain
    cl = _client({"fields": [], "data": [[[0, "i1"]], [[0, "i2"]]]})
    rc = climain.generic_main(gnt_instance.commands, ["shutdown", "--tags", "web", "db"],
                              prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 1 and cl.submitted == []
    assert "--force-multiple" in capsys.readouterr().err
    assert _last_query(cl) == ("instance", ["name"],
                             ["|", ["=[]", "tags", "web"], ["=[]", "tags", "db"]])
    rc = climain.generic_main(gnt_instance.commands,
                              ["shutdown", "--tags", "--force-multiple", "--submit",
                               "--timeout", "5", "web"],
                              prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0
    assert [(ops[0]["OP_ID"], ops[0]["instance_name"], ops[0]["timeout"]) for ops in cl.submitted] \
        == [("OP_INSTANCE_SHUTDOWN", "i1", 5), ("OP_INSTANCE_SHUTDOWN", "i2", 5)]


def test_every_option_has_help() -> None:
    for name, row in gnt_instance.commands.items():
        for opt in row[2]:
            assert opt.kwargs.get("help"), f"gnt-instance {name}: {opt!r} has no help text"


def _modify_op(argv: list[str]) -> dict[str, Any]:
    """The one opcode ``gnt-instance modify ARGV --submit inst1`` submits."""
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands, ["modify", *argv, "--submit", "inst1"],
                              prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0
    (op,) = cl.submitted[0]
    assert op["OP_ID"] == "OP_INSTANCE_SET_PARAMS" and op["instance_name"] == "inst1"
    return dict(op)


@pytest.mark.parametrize("argv, expect", [
    (["-m", "512M"], {"runtime_mem": 512}),
    (["--runtime-memory", "1G", "-f"], {"runtime_mem": 1024, "force": True}),
], ids=["short", "long-force"])
def test_modify_runtime_memory(argv: list[str], expect: dict[str, Any]) -> None:
    op = _modify_op(argv)
    assert {k: op.get(k) for k in expect} == expect
    assert ("force" in op) == ("force" in expect)


@pytest.mark.parametrize("argv, expect", [
    (["-t", "drbd", "-n", "node2"], {"disk_template": "drbd", "remote_node": "node2"}),
    (["-t", "drbd", "-n", "node2", "--no-wait-for-sync"],
     {"disk_template": "drbd", "remote_node": "node2", "wait_for_sync": False}),
    (["--disk-template", "plain"], {"disk_template": "plain"}),
    (["-t", "drbd", "-I", "hail"], {"disk_template": "drbd", "iallocator": "hail"}),
], ids=["to-drbd", "no-wait", "to-plain", "allocator"])
def test_modify_disk_template_conversion(argv: list[str], expect: dict[str, Any]) -> None:
    op = _modify_op(argv)
    assert {k: op.get(k) for k in expect} == expect
    for key in ("remote_node", "wait_for_sync", "iallocator"):
        assert (key in op) == (key in expect)       # not given: the master's default


@pytest.mark.parametrize("argv, expect", [
    (["--hotplug", "--net", "add"], {"hotplug": True, "nics": [["add", -1, {}]]}),
    (["--hotplug-if-possible", "--disk", "1:remove"],
     {"hotplug_if_possible": True, "disks": [["remove", 1, {}]]}),
    (["--net", "0:remove"], {"nics": [["remove", 0, {}]]}),
], ids=["hotplug", "if-possible", "neither"])
def test_modify_hotplug_flags(argv: list[str], expect: dict[str, Any]) -> None:
    op = _modify_op(argv)
    assert {k: op.get(k) for k in expect} == expect
    # not given: left out, so the master's defaults apply
    for flag in ("hotplug", "hotplug_if_possible"):
        assert (flag in op) == (flag in expect)


def test_activate_disks_wait_for_sync_and_ignore_size() -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands,
                              ["activate-disks", "--wait-for-sync", "--ignore-size", "--submit",
                               "inst1"], prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0
    (op,) = cl.submitted[0]
    assert (op["OP_ID"], op["wait_for_sync"], op["ignore_size"]) == \
        ("OP_INSTANCE_ACTIVATE_DISKS", True, True)


def test_migrate_with_disks_sets_the_opcode_parameter() -> None:
    from ganeti.cli import main as climain
    for argv, expected in ((["migrate", "-f", "--submit", "inst1"], None),
                           (["migrate", "-f", "--with-disks", "--submit", "inst1"], True)):
        cl = _client()
        rc = climain.generic_main(gnt_instance.commands, argv, prog="gnt-instance",
                                  client_factory=lambda: cl)
        assert rc == 0
        assert cl.submitted[0][0]["OP_ID"] == "OP_INSTANCE_MIGRATE"
        assert cl.submitted[0][0].get("with_disks") is expected


@pytest.mark.parametrize("argv, op_id, expected", [
    (["add", "-t", "diskless", "-o", "tinyos", "-n", "node1", "--os-parameters-private",
      "token=tok-1", "--os-parameters-secret", "key=key-1", "inst1"], "OP_INSTANCE_CREATE",
     {"osparams_private": {"token": "tok-1"}, "osparams_secret": {"key": "key-1"}}),
    (["reinstall", "-f", "--os-parameters-private", "token=tok-2", "--os-parameters-secret",
      "key=key-2", "inst1"], "OP_INSTANCE_REINSTALL",
     {"osparams_private": {"token": "tok-2"}, "osparams_secret": {"key": "key-2"}}),
    (["modify", "--os-parameters-private", "token=tok-3", "inst1"], "OP_INSTANCE_SET_PARAMS",
     {"osparams_private": {"token": "tok-3"}}),
    (["add", "-t", "diskless", "-o", "tinyos", "-n", "node1", "inst1"], "OP_INSTANCE_CREATE",
     {}),
], ids=["add", "reinstall", "modify", "add-without"])
def test_private_and_secret_os_parameters(argv: list[str], op_id: str,
                                          expected: dict[str, Any]) -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands, [*argv[:-1], "--submit", argv[-1]],
                              prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert op["OP_ID"] == op_id
    assert {k: op[k] for k in ("osparams_private", "osparams_secret") if k in op} == expected


def test_plain_disk_options_vg_and_spindles() -> None:
    assert gnt_instance.parse_mods(["add:size=1G,vg=fastvg,spindles=2"], "disk") == \
        [["add", -1, {"size": 1024, "vg": "fastvg", "spindles": 2}]]


@pytest.mark.parametrize("flags,checks", [
    ([], (False, False)),                                  # Ganeti's rename checks nothing
    (["--name-check"], (True, False)),
    (["--name-check", "--ip-check"], (True, True)),
    (["--no-name-check", "--no-ip-check"], (False, False)),
], ids=["default", "name", "name-and-ip", "no-checks"])
def test_rename_checks_only_what_it_is_asked_to(flags: list[str],
                                                checks: tuple[bool, bool]) -> None:
    cl = _client()
    from ganeti.cli import main as climain
    rc = climain.generic_main(gnt_instance.commands,
                              ["rename", *flags, "--submit", "inst1.example.com",
                               "inst2.example.com"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert (op["name_check"], op["ip_check"]) == checks


def test_os_image_options_are_the_os_parameters_os_image_and_checksum() -> None:
    # Ganeti 3.0 names the image by the OS parameter os-image (doc/images.md)
    from ganeti.cli import main as climain
    digest = "ab" * 32
    cl = _client()
    rc = climain.generic_main(gnt_instance.commands,
                              ["add", "-t", "file", "-s", "1G", "--os-image", "/srv/img.qcow2",
                               "--os-image-checksum", f"sha256:{digest}", "-O", "user=alice",
                               "--no-start", "--submit", "inst1"], prog="gnt-instance",
                              client_factory=lambda: cl)
    assert rc == 0
    op = cl.submitted[0][0]
    assert "os_type" not in op
    assert op["osparams"] == {"user": "alice", "os-image": "/srv/img.qcow2",
                              "os-image-checksum": f"sha256:{digest}"}
    cl = _client()
    rc = climain.generic_main(gnt_instance.commands,
                              ["reinstall", "-f", "--os-image", "http://h/i.img", "--submit",
                               "inst1"], prog="gnt-instance", client_factory=lambda: cl)
    assert rc == 0
    assert cl.submitted[0][0]["osparams"] == {"os-image": "http://h/i.img"}
