"""Answer parsing, the external runner (a shell script), and the input document builder."""

from __future__ import annotations

import os
import stat

import pytest
from fakes.allocdocs import alloc_request, cluster, instance, node

from ganeti import constants, errors, serializer
from ganeti.iallocator import answer, document, runner
from ganeti.objects import Cluster, ConfigData, Disk, Instance, Node, NodeGroup

EVAC = document.node_evacuate_request(["x"], "all")


def test_allocate_answer_is_checked():
    req = alloc_request()
    ans = answer.parse_answer('{"success": true, "info": "ok", "result": ["n1"]}', req)
    assert ans.success and ans.nodes == ["n1"] and ans.info == "ok"
    with pytest.raises(errors.OpPrereqError, match="2 node"):
        answer.parse_answer('{"success": true, "info": "", "result": ["a", "b"]}', req)


def test_old_answers_with_nodes_are_accepted():
    ans = answer.parse_answer('{"success": true, "info": "", "nodes": ["n1"]}', alloc_request())
    assert ans.nodes == ["n1"]


@pytest.mark.parametrize("text, why", [
    ("not json", "not valid JSON"),
    ("[]", "JSON object"),
    ('{"success": true, "info": ""}', "'result' missing"),
    ('{"success": "yes", "info": "", "result": []}', "boolean"),
])
def test_malformed_answers_quote_the_output(text, why):
    with pytest.raises(errors.OpPrereqError, match=why) as exc:
        answer.parse_answer(text, alloc_request())
    assert text in str(exc.value)


def test_failed_answer_keeps_the_info():
    ans = answer.parse_answer('{"success": false, "info": "FailMem: 3", "result": []}',
                              alloc_request())
    assert not ans.success
    with pytest.raises(errors.OpPrereqError, match="FailMem: 3"):
        ans.require_success("x")


def test_evacuation_answer_opcodes_are_restricted():
    good = {"success": True, "info": "", "result": [
        [["x", "g1", ["n2"]]], [["y", "no room"]],
        [[{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "x", "target_node": "n2"}]]]}
    ans = answer.parse_data(good, EVAC)
    assert ans.moved[0].nodes == ["n2"] and ans.failed[0].reason == "no room"
    bad = {**good, "result": [[], [], [[{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "x"}]]]}
    with pytest.raises(errors.OpPrereqError, match="not allowed"):
        answer.parse_data(bad, EVAC)


# --- the runner -----------------------------------------------------------------------------

def _script(directory, name: str, body: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_external_allocator_gets_the_file_and_options(tmp_path):
    seen = tmp_path / "seen.json"
    _script(tmp_path / "ia", "mine", f'cp "$1" {seen}; echo "$2" > {seen}.args\n'
            'echo \'{"success": true, "info": "mine", "result": ["n9"]}\'\n')
    doc = cluster({"n1": node()}, request=alloc_request())
    ans = runner.run_allocator("mine", doc, search_path=[str(tmp_path / "none"),
                                                         str(tmp_path / "ia")],
                               params={"opt": "v"})
    assert ans.nodes == ["n9"] and ans.info == "mine"
    assert serializer.loads(seen.read_text()) == doc
    assert (tmp_path / "seen.json.args").read_text().strip() == "--opt=v"


def test_failing_allocator_shows_its_output(tmp_path):
    _script(tmp_path, "broken", 'echo "cannot think today" >&2; exit 3\n')
    doc = cluster({"n1": node()}, request=alloc_request())
    with pytest.raises(errors.OpPrereqError, match="cannot think today") as exc:
        runner.run_allocator("broken", doc, search_path=[str(tmp_path)])
    assert "status 3" in str(exc.value)


def test_garbage_output_is_refused(tmp_path):
    _script(tmp_path, "chatty", 'echo "hello there"\n')
    doc = cluster({"n1": node()}, request=alloc_request())
    with pytest.raises(errors.OpPrereqError, match="hello there"):
        runner.run_allocator("chatty", doc, search_path=[str(tmp_path)])


def test_names_resolve_to_programs_or_the_builtin(tmp_path):
    assert runner.resolve(None, []) is None
    assert runner.resolve("ganeti-iallocator", []) is None
    assert runner.resolve("hail", [str(tmp_path)]) is None        # no hail installed
    hail = _script(tmp_path, "hail", "exit 0\n")
    assert runner.resolve("hail", [str(tmp_path)]) == hail
    with pytest.raises(errors.OpPrereqError, match="not found"):
        runner.resolve("nosuch", [str(tmp_path)])
    with pytest.raises(errors.OpPrereqError, match="Invalid"):
        runner.resolve("../bin/sh", [str(tmp_path)])


def test_builtin_runs_in_process():
    doc = cluster({"n1": node(free=5000), "n2": node(free=20000)}, request=alloc_request())
    assert runner.run_allocator(None, doc, search_path=[]).nodes == ["n2"]


# --- the document ---------------------------------------------------------------------------

def _config() -> ConfigData:
    group = NodeGroup(name="default", uuid="g1", alloc_policy="last_resort",
                      ipolicy={"vcpu-ratio": 2.0})
    nodes = {f"u{i}": Node(name=f"n{i}", uuid=f"u{i}", primary_ip=f"10.0.0.{i}", group="g1")
             for i in (1, 2)}
    nodes["u2"].offline = True
    disk = Disk(uuid="d1", dev_type=constants.DT_FILE, size=2048, nodes=["u1"])
    inst = Instance(name="i1", uuid="i1", primary_node="u1", disk_template=constants.DT_FILE,
                    admin_state=constants.ADMINST_UP, disks=["d1"], beparams={"maxmem": 512})
    return ConfigData(cluster=Cluster(cluster_name="c", tags=["t"]), nodes=nodes,
                      nodegroups={"g1": group}, instances={"i1": inst}, disks={"d1": disk})


def test_document_has_every_section():
    live = {"u1": {"memory_total": 4096, "memory_free": 3000, "memory_dom0": 512,
                   "cpu_total": 4, "storage": [{"storage_size": 10000, "storage_free": 8000}]}}
    doc = document.build_input(_config(), live, alloc_request())
    assert doc["version"] == 2 and doc["cluster_name"] == "c" and doc["cluster_tags"] == ["t"]
    group = doc["nodegroups"]["g1"]
    assert group["alloc_policy"] == "last_resort" and group["ipolicy"]["vcpu-ratio"] == 2.0
    assert group["ipolicy"]["minmax"]          # the cluster's, under the group's keys
    n1, n2 = doc["nodes"]["n1"], doc["nodes"]["n2"]
    assert n1["free_memory"] == 3000 and n1["total_disk"] == 10000 and n1["free_disk"] == 8000
    assert n1["i_pri_memory"] == n1["i_pri_up_memory"] == 512
    assert n1["ndparams"]["exclusive_storage"] is False
    assert n2["offline"] is True and "free_memory" not in n2
    i1 = doc["instances"]["i1"]
    assert i1["nodes"] == ["n1"] and i1["memory"] == 512 and i1["disk_space_total"] == 2048
    assert i1["disks"][0]["size"] == 2048 and i1["admin_state"] == "up"


def test_requests_are_checked():
    with pytest.raises(errors.OpPrereqError, match="evac_mode"):
        document.check_request({"type": "node-evacuate", "instances": []})
    assert document.check_request(document.change_group_request(["a"], [])) == "change-group"


def test_instance_helper_documents_round_trip():
    doc = cluster({"n1": node()}, {"a": instance(["n1"])}, request=EVAC)
    assert serializer.loads(serializer.dumps(doc)) == doc
