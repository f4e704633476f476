"""A script on Ganeti 3.0's own Python LUXI client (``ganeti.luxi.Client``).

Run by test/integration/test_upstream_cli.py with Debian's ``python3 -E -s``
inside the private mount namespace of test/integration/upstream_cli.py, so
the client finds our master's socket at upstream's path.  It imports
upstream's package from /usr/share/ganeti/3.0 (never this project's) and
prints its results as one JSON object; the assertions are in the test.
"""

import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")

from ganeti import cli, luxi, opcodes  # noqa: E402  (upstream's package)


def main() -> None:
    cl = luxi.Client()
    out = {"module": luxi.__file__}
    out["info_name"] = cl.QueryClusterInfo()["name"]
    out["nodes"] = cl.QueryNodes([], ["name", "role"], False)
    out["instances"] = cl.QueryInstances([], ["name", "status", "be/memory"], False)
    out["groups"] = cl.QueryGroups([], ["name", "node_cnt"], False)
    out["networks"] = cl.QueryNetworks([], ["name"], False)
    out["exports"] = cl.QueryExports([], False)
    out["config"] = cl.QueryConfigValues(["cluster_name", "master_node"])
    out["query"] = [list(row) for row in cl.Query("node", ["name", "vm_capable"], None).data]
    out["fields"] = [f.name for f in cl.QueryFields("instance", ["name", "vcpus"]).fields]
    job = cl.SubmitJob([opcodes.OpTagsSet(kind="cluster", name=None, tags=["luxi-script"])])
    out["job"] = job
    out["job_result"] = cli.PollJob(job, cl=cl, feedback_fn=lambda msg: None)
    out["jobs"] = cl.QueryJobs([job], ["id", "status"])
    out["tags"] = cl.QueryTags("cluster", "")
    out.update(_queue_methods(cl))
    print(json.dumps(out))


def _error(call):
    """The class name of what ``call()`` raised, or None when it returned."""
    try:
        call()
    except Exception as exc:  # upstream's errors, whatever their class
        return type(exc).__name__
    return None


def _queue_methods(cl):
    """The client's remaining job-queue methods, each as upstream calls it."""
    out = {}
    delay = opcodes.OpTestDelay
    out["drain_set"] = cl.SetQueueDrainFlag(True)
    out["drained_submit_error"] = _error(lambda: cl.SubmitJob([delay(duration=0)]))
    drained = cl.SubmitJobToDrainedQueue([delay(duration=0)])
    out["drain_unset"] = cl.SetQueueDrainFlag(False)
    many = cl.SubmitManyJobs([[delay(duration=0)], [delay(duration=0)]])
    out["many_ok"] = [ok for ok, _ in many]
    ids = [drained] + [job for _, job in many]
    for job in ids:
        cli.PollJob(job, cl=cl, feedback_fn=lambda msg: None)
    once = cl.WaitForJobChangeOnce(ids[0], ["status"], None, None, timeout=5)
    out["wait_once"] = once
    slow = cl.SubmitJob([delay(duration=30, interruptible=True)])
    out["priority"] = cl.ChangeJobPriority(slow, 5)
    out["cancel"] = cl.CancelJob(slow, True)     # running: only kill=True interrupts it
    out["slow_status"] = cl.WaitForJobChangeOnce(slow, ["status"], None, None, timeout=10)
    out["slow_id"] = slow
    out["archive"] = cl.ArchiveJob(ids[0])
    out["archived_id"] = ids[0]
    out["archived_query"] = cl.QueryJobs([ids[0]], ["id"])
    out["autoarchive"] = cl.AutoArchiveJobs(0)
    out["watcher_pause"] = cl.SetWatcherPause(None)
    out["filters"] = cl.QueryFilters([], ["uuid"])
    return out


if __name__ == "__main__":
    main()
