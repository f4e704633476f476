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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
