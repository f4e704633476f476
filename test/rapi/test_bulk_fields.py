"""The ``bulk=1`` field lists: every field Ganeti's RAPI returns, each known to our queries.

The lists below are Ganeti's (doc/rapi.md: "Returned fields" of
``/2/instances``, ``/2/nodes``, ``/2/groups``, ``/2/networks``, ``/2/jobs`` and
``/2/jobs/[job_id]``), written out here on purpose: the test fails when a
field is dropped from :mod:`ganeti.rapi.resources` or when a query table
stops knowing one (RAPI would then answer ``null`` for it).
"""

from __future__ import annotations

import pytest

from ganeti import constants
from ganeti.cmdlib import query as cquery
from ganeti.rapi import resources as res
from ganeti.rapi.resources import networks

_COMMON = ["ctime", "mtime", "uuid", "serial_no", "tags"]

GANETI_INSTANCE_FIELDS = [
    "name", "admin_state", "os", "pnode", "snodes", "disk_template",
    "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links",
    "nic.networks", "nic.networks.names", "nic.bridges", "network_port",
    "disk.sizes", "disk.spindles", "disk_usage", "disk.uuids", "disk.names",
    "beparams", "hvparams", "oper_state", "oper_ram", "oper_vcpus", "status",
    "custom_hvparams", "custom_beparams", "custom_nicparams", "custom_osparams", *_COMMON]
GANETI_NODE_FIELDS = [
    "name", "offline", "master_candidate", "drained", "dtotal", "dfree", "sptotal", "spfree",
    "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt", "ctotal", "cnos", "cnodes",
    "csockets", "pip", "sip", "role", "pinst_list", "sinst_list", "master_capable",
    "vm_capable", "ndparams", "group.uuid", *_COMMON]
GANETI_GROUP_FIELDS = [
    "alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy",
    "diskparams", "custom_diskparams", "ndparams", "custom_ndparams", *_COMMON]
GANETI_NETWORK_FIELDS = [
    "name", "network", "gateway", "network6", "gateway6", "mac_prefix", "free_count",
    "reserved_count", "map", "group_list", "inst_list", "external_reservations", *_COMMON]
GANETI_JOB_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts",
                          "start_ts", "end_ts"]
GANETI_JOB_FIELDS = [*GANETI_JOB_FIELDS_BULK, "oplog", "opresult"]

CASES = [
    ("instances", constants.QR_INSTANCE, res.I_FIELDS, GANETI_INSTANCE_FIELDS),
    ("nodes", constants.QR_NODE, res.N_FIELDS, GANETI_NODE_FIELDS),
    ("groups", constants.QR_GROUP, res.G_FIELDS, GANETI_GROUP_FIELDS),
    ("networks", constants.QR_NETWORK, networks.NET_FIELDS, GANETI_NETWORK_FIELDS),
    ("jobs-bulk", constants.QR_JOB, res.J_FIELDS_BULK, GANETI_JOB_FIELDS_BULK),
    ("job", constants.QR_JOB, res.J_FIELDS, GANETI_JOB_FIELDS),
]


@pytest.mark.parametrize(("resource", "ours", "ganeti"), [(c[1], c[2], c[3]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bulk_lists_are_ganetis(resource, ours, ganeti) -> None:
    assert sorted(ours) == sorted(ganeti)
    assert len(ours) == len(set(ours))


@pytest.mark.parametrize(("resource", "fields"), [(c[1], c[2]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_every_bulk_field_is_known_to_the_query(resource, fields) -> None:
    described = cquery.run_query_fields(resource, list(fields))["fields"]
    unknown = [f["name"] for f in described if f["kind"] == constants.QFT_UNKNOWN]
    assert unknown == []
