"""Drive our RAPI daemon with Ganeti's own client library (``ganeti.rapi.client``).

Run by test/integration/test_rapi_upstream_client.py with the system's
``python3`` (Debian's package ``python3-ganeti-rapi``), never with the
project's interpreter: that library's top-level package is also called
``ganeti``.  It must therefore not import anything from this project, and
it is plain Python 3 without ``from __future__`` niceties beyond the
standard library.

Usage: ``python3 -I upstream_rapi_driver.py CONFIG_JSON``.  The
configuration names the phase to run (``main``, ``cancel`` or ``filters``), the
daemon's address and credentials, the CA file and the cluster's names.
The driver prints one JSON object on stdout: one key per step, its value
the library's result, or ``{"error": message, "code": code}`` when the
library raised (with ``"crash": true`` when it failed on an answer it did
not expect, e.g. a missing key).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from ganeti.rapi import client as rapi_client  # the Debian package, never ours

#: how often and how long a job is polled (WaitForJobCompletion's period, tries)
POLL_PERIOD = 0.1
POLL_TRIES = 1800


class Recorder:
    """Runs steps and keeps their results (or the library's error) by name."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}

    def step(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            value = fn(*args, **kwargs)
        except rapi_client.GanetiApiError as exc:
            self.results[name] = {"error": str(exc), "code": exc.code}
            return None
        except Exception as exc:   # the library choked on an answer: record, go on
            self.results[name] = {"error": f"{type(exc).__name__}: {exc}", "code": None,
                                  "crash": True}
            return None
        self.results[name] = value
        return value


def make_client(cfg: dict[str, Any], user: str, password: str
                ) -> rapi_client.GanetiRapiClient:
    """A client that verifies the daemon's certificate against ``cafile``."""
    curl_config = rapi_client.GenericCurlConfig(cafile=cfg["cafile"], verify_hostname=False,
                                                connect_timeout=30, timeout=120)
    return rapi_client.GanetiRapiClient(cfg["host"], port=cfg["port"], username=user,
                                        password=password, curl_config_fn=curl_config)


def finish(rec: Recorder, cl: rapi_client.GanetiRapiClient, name: str, job_id: Any) -> None:
    """Record ``job_id``, whether it succeeded, and its final status."""
    rec.results[name + ".job"] = job_id
    if not isinstance(job_id, int):
        return
    rec.step(name + ".ok", cl.WaitForJobCompletion, job_id, period=POLL_PERIOD,
             retries=POLL_TRIES)
    status = rec.step(name + ".status", cl.GetJobStatus, job_id)
    if isinstance(status, dict) and status.get("status") != "success":
        rec.results[name + ".failure"] = status.get("opresult")


def submit(rec: Recorder, cl: rapi_client.GanetiRapiClient, name: str, fn: Any,
           *args: Any, **kwargs: Any) -> None:
    job_id = rec.step(name, fn, *args, **kwargs)
    finish(rec, cl, name, job_id)


def phase_main(cfg: dict[str, Any], rec: Recorder) -> None:
    cl = make_client(cfg, cfg["writer"], cfg["writer_password"])
    reader = make_client(cfg, cfg["reader"], cfg["reader_password"])
    anonymous = rapi_client.GanetiRapiClient(
        cfg["host"], port=cfg["port"],
        curl_config_fn=rapi_client.GenericCurlConfig(cafile=cfg["cafile"]))
    inst, new_name, node1, node2, node3 = (cfg["instance"], cfg["new_name"], cfg["node1"],
                                           cfg["node2"], cfg["node3"])

    # cluster
    rec.step("version", anonymous.GetVersion)
    rec.step("features", cl.GetFeatures)
    rec.step("info", reader.GetInfo)
    rec.step("os", cl.GetOperatingSystems)
    submit(rec, cl, "cluster_tags_add", cl.AddClusterTags, ["upstream", "client"])
    rec.step("cluster_tags", cl.GetClusterTags)
    submit(rec, cl, "cluster_tags_del", cl.DeleteClusterTags, ["client"])
    rec.step("cluster_tags_after", cl.GetClusterTags)

    # nodes
    rec.step("nodes", cl.GetNodes)
    rec.step("nodes_bulk", cl.GetNodes, bulk=True)
    rec.step("node", cl.GetNode, node1)
    rec.step("node_missing", cl.GetNode, "nosuch.vcluster")
    rec.step("groups", cl.GetGroups)
    rec.step("groups_bulk", cl.GetGroups, bulk=True)
    rec.step("node3_role", cl.GetNodeRole, node3)
    submit(rec, cl, "set_role_drained", cl.SetNodeRole, node3, "drained", force=True)
    rec.step("node3_role_drained", cl.GetNodeRole, node3)
    submit(rec, cl, "set_role_candidate", cl.SetNodeRole, node3, "master-candidate",
           auto_promote=False)
    rec.step("node3_role_after", cl.GetNodeRole, node3)
    rec.step("set_role_by_reader", reader.SetNodeRole, node3, "drained")
    submit(rec, cl, "node_tags_add", cl.AddNodeTags, node2, ["rack1"])
    rec.step("node_tags", cl.GetNodeTags, node2)
    submit(rec, cl, "node_tags_del", cl.DeleteNodeTags, node2, ["rack1"])

    # an instance's life
    submit(rec, cl, "create", cl.CreateInstance, "create", inst, "diskless", [], [{}],
           os=cfg["os"], pnode=node2, name_check=False, ip_check=False, start=True,
           reason="upstream-client")
    create_job = rec.results.get("create")
    if isinstance(create_job, int):
        change = rec.step("wait_change", cl.WaitForJobChange, create_job, ["status"], None,
                          None)
        if isinstance(change, dict) and change["log_entries"]:
            last_serial = change["log_entries"][-1][0]
            rec.step("wait_change_again", cl.WaitForJobChange, create_job, ["status"],
                     change["job_info"], last_serial)
    rec.step("instances", cl.GetInstances)
    rec.step("instances_bulk", cl.GetInstances, bulk=True)
    rec.step("instance", cl.GetInstance, inst)
    submit(rec, cl, "info_job", cl.GetInstanceInfo, inst, static=True)
    submit(rec, cl, "shutdown", cl.ShutdownInstance, inst, timeout=0)
    rec.step("instance_down", cl.GetInstance, inst)
    submit(rec, cl, "startup", cl.StartupInstance, inst)
    submit(rec, cl, "reboot", cl.RebootInstance, inst, reboot_type="soft",
           ignore_secondaries=False)
    rec.step("instance_up", cl.GetInstance, inst)
    rec.step("console", cl.GetInstanceConsole, inst)
    rec.step("console_by_reader", reader.GetInstanceConsole, inst)
    submit(rec, cl, "modify", cl.ModifyInstance, inst, beparams={"vcpus": 2})
    rec.step("instance_modified", cl.GetInstance, inst)
    submit(rec, cl, "inst_tags_add", cl.AddInstanceTags, inst, ["web", "prod"])
    rec.step("inst_tags", cl.GetInstanceTags, inst)
    submit(rec, cl, "inst_tags_del", cl.DeleteInstanceTags, inst, ["prod"])
    rec.step("inst_tags_after", cl.GetInstanceTags, inst)
    submit(rec, cl, "reinstall", cl.ReinstallInstance, inst, os=cfg["os"], no_startup=True)
    rec.step("instance_reinstalled", cl.GetInstance, inst)
    submit(rec, cl, "rename", cl.RenameInstance, inst, new_name, ip_check=False,
           name_check=False)
    rec.step("instance_renamed", cl.GetInstance, new_name)

    # a file based instance: grow its disk; the node storage it lives in
    file_inst, file_dir = cfg["file_instance"], cfg["file_storage_dir"]
    submit(rec, cl, "create_file", cl.CreateInstance, "create", file_inst, "file",
           [{"size": 16}], [{}], os=cfg["os"], pnode=node3, name_check=False, ip_check=False,
           start=False)
    submit(rec, cl, "grow", cl.GrowInstanceDisk, file_inst, 0, 8, wait_for_sync=False)
    rec.step("instance_grown", cl.GetInstance, file_inst)
    submit(rec, cl, "storage", cl.GetNodeStorageUnits, node3, "file",
           "node,type,name,size,used,free,allocatable")
    rec.step("storage_by_reader", reader.GetNodeStorageUnits, node3, "file", "name")
    submit(rec, cl, "storage_modify", cl.ModifyNodeStorageUnits, node3, "file", file_dir,
           allocatable=False)
    submit(rec, cl, "storage_repair", cl.RepairNodeStorageUnits, node3, "file", file_dir)
    submit(rec, cl, "delete_file", cl.DeleteInstance, file_inst)

    # query2
    rec.step("query_nodes", cl.Query, "node", ["name", "role"])
    rec.step("query_filter", cl.Query, "instance", ["name", "status"],
             qfilter=["=", "name", new_name])
    rec.step("query_fields", cl.QueryFields, "node", ["name", "role"])
    rec.step("query_fields_all", cl.QueryFields, "instance")

    # jobs
    rec.step("jobs", cl.GetJobs)
    rec.step("cancel_finished", cl.CancelJob, create_job)

    submit(rec, cl, "delete", cl.DeleteInstance, new_name)
    rec.step("instance_deleted", cl.GetInstance, new_name)


def phase_cancel(cfg: dict[str, Any], rec: Recorder) -> None:
    """Cancel a job that waits for a lock (the test holds it with a delay job)."""
    cl = make_client(cfg, cfg["writer"], cfg["writer_password"])
    job_id = rec.step("blocked", cl.SetNodeRole, cfg["node3"], "drained", force=True)
    if not isinstance(job_id, int):
        return
    status = None
    for _ in range(POLL_TRIES):
        status = cl.GetJobStatus(job_id)["status"]
        if status == "waiting":
            break
        time.sleep(POLL_PERIOD)
    rec.results["blocked.status_before"] = status
    rec.step("cancel", cl.CancelJob, job_id)
    rec.step("cancel.ok", cl.WaitForJobCompletion, job_id, period=POLL_PERIOD,
             retries=POLL_TRIES)
    rec.step("cancel.status", cl.GetJobStatus, job_id)
    rec.step("node3_role", cl.GetNodeRole, cfg["node3"])


def phase_filters(cfg: dict[str, Any], rec: Recorder) -> None:
    """Job filter rules: add, list, get, replace, a job they reject, delete."""
    cl = make_client(cfg, cfg["writer"], cfg["writer_password"])
    reader = make_client(cfg, cfg["reader"], cfg["reader_password"])
    uuid = rec.step("add", cl.AddFilter, 5, [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
                    "CONTINUE", reason_trail=[("qa", "filters", 1)])
    rec.step("list", reader.GetFilters)
    rec.step("list_bulk", reader.GetFilters, bulk=True)
    rec.step("get", reader.GetFilter, uuid)
    rec.step("reader_add", reader.AddFilter, 0, [], "REJECT")
    rec.step("replace", cl.ReplaceFilter, uuid, 0,
             [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]], "REJECT")
    rec.step("get_replaced", reader.GetFilter, uuid)
    rec.step("bad_action", cl.AddFilter, 0, [], "DROP")
    rec.step("list_after_bad", reader.GetFilters)
    rec.step("delete", cl.DeleteFilter, uuid)
    rec.step("delete_again", cl.DeleteFilter, uuid)
    rec.step("list_after", reader.GetFilters)


def phase_networks(cfg: dict[str, Any], rec: Recorder) -> None:
    """Networks: create, list, get, modify, connect, tags, a bad one, disconnect, delete."""
    cl = make_client(cfg, cfg["writer"], cfg["writer_password"])
    reader = make_client(cfg, cfg["reader"], cfg["reader_password"])
    submit(rec, cl, "create", cl.CreateNetwork, "rapinet", "192.0.2.0/28",
           gateway="192.0.2.1", add_reserved_ips="192.0.2.9", tags="lab")
    rec.step("list", reader.GetNetworks)
    rec.step("list_bulk", reader.GetNetworks, bulk=True)
    rec.step("get", reader.GetNetwork, "rapinet")
    rec.step("reader_create", reader.CreateNetwork, "nope", "192.0.2.64/28")
    submit(rec, cl, "bad", cl.CreateNetwork, "badnet", "10.0.0.0/15")
    submit(rec, cl, "modify", cl.ModifyNetwork, "rapinet", mac_prefix="aa:00:77",
           add_reserved_ips=["192.0.2.10"])   # (a list here: the body as given)
    submit(rec, cl, "connect", cl.ConnectNetwork, "rapinet", "default", "bridged", "br5",
           vlan=".5")
    rec.step("get_connected", reader.GetNetwork, "rapinet")
    submit(rec, cl, "add_tags", cl.AddNetworkTags, "rapinet", ["blue"])
    rec.step("tags", reader.GetNetworkTags, "rapinet")
    submit(rec, cl, "delete_tags", cl.DeleteNetworkTags, "rapinet", ["lab"])
    rec.step("tags_after", reader.GetNetworkTags, "rapinet")
    submit(rec, cl, "delete_connected", cl.DeleteNetwork, "rapinet")
    submit(rec, cl, "disconnect", cl.DisconnectNetwork, "rapinet", "default")
    submit(rec, cl, "delete", cl.DeleteNetwork, "rapinet")
    rec.step("list_after", reader.GetNetworks)
    rec.step("get_gone", reader.GetNetwork, "rapinet")


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        cfg = json.load(fh)
    rec = Recorder()
    rec.results["library"] = rapi_client.__file__
    {"main": phase_main, "cancel": phase_cancel,
     "filters": phase_filters, "networks": phase_networks}[cfg["phase"]](cfg, rec)
    json.dump(rec.results, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(rapi_client.UsesRapiClient(main)())
