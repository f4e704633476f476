"""Upstream's ``harep`` (Debian's ganeti-htools-3.0, unchanged) against our master (doc/ha.md).

harep reads the cluster over LUXI, submits the repair jobs its
``ganeti:watcher:autorepair:*`` tags allow and records them in
``pending``/``result`` tags.  It repairs only ``drbd`` and ``plain``
instances, so the repairs run on the session's guest cluster (real DRBD
and LVM; harep runs on the master node, against our master's socket):
a ``drbd`` instance allowed to fail over whose primary died and was
marked offline is failed over to its secondary, then given a new
secondary; a ``plain`` one allowed only ``fix-storage`` gets ``enoperm``;
a suspended one is left alone.  The bookkeeping of a pending repair whose
job failed needs no template: it runs on a virtual cluster, harep under
test/integration/upstream_cli.py's private mount namespace.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import time

import pytest
import upstream_cli
from vcluster_harness import VirtualCluster

from test.integration import host_helpers
from test.integration.guest_cluster_harness import GuestClusterFixture

pytestmark = pytest.mark.timeout(1200)

P = "ganeti:watcher:autorepair:"
HAREP = os.path.join(upstream_cli.HTOOLS_DIR, "harep")
#: our master's LUXI socket inside a guest node (the standard paths)
#: the socket Ganeti 2.10+ clients use by default: our master daemon links it to its own
GUEST_SOCKET = "/var/run/ganeti/socket/ganeti-query"
N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _tags(out: str) -> list[str]:
    return sorted(out.split())


def _rapi_get(vc, path: str):  # type: ignore[no-untyped-def]
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=tls, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        return json.loads(resp.read())
    finally:
        conn.close()


# --- a pending repair's bookkeeping, on a virtual cluster -------------------------------

@pytest.fixture(scope="module")
def vc(tmp_path_factory):  # type: ignore[no-untyped-def]
    reason = upstream_cli.unusable()
    host_helpers.skip_unless(reason, required_by=upstream_cli.REQUIRE_ENV)
    upstream_cli.prepare_host()
    with VirtualCluster(tmp_path_factory.mktemp("vcharep"), nodes=2, use_ssh=False) as cluster:
        yield cluster


def test_pending_repairs_get_their_result_when_their_jobs_end(vc, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = "f1.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "-o", "tinyos+default", "-s", "16M", "-n", N1,
          "--no-name-check", "--no-ip-check", name)
    # a job that fails (a file instance cannot fail over) and one still running
    failed = vc.run("gnt-instance", "failover", "-f", "--submit", "--print-jobid", name)
    failed_id = int(re.findall(r"\d+", failed.stdout)[0])
    busy = int(re.findall(r"\d+", vc.ok("gnt-debug", "delay", "--submit", "--print-jobid",
                                        "60"))[0])
    deadline = time.monotonic() + 60
    while vc.ok("gnt-job", "list", "--no-headers", "-o", "status", str(failed_id)).strip() \
            not in ("error", "success"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    pending = f"{P}pending:failover:rid-1:1700000000:{failed_id}"
    vc.ok("gnt-instance", "add-tags", name, P + "failover", pending)
    assert vc.ok("gnt-instance", "list", "--no-headers", "-o", "ha_state", name).strip() == (
        f"failover (instance); last: failover pending since 1700000000, jobs {failed_id}")

    res = upstream_cli.run(vc, str(tmp_path), "harep")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f'Moving {name} from "Pending repair" to "Failure"' in res.stdout
    tags = _tags(vc.ok("gnt-instance", "list-tags", name))
    assert tags[0] == P + "failover" and len(tags) == 2
    assert re.fullmatch(rf"{P}result:failover:rid-1:\d+:failure:{failed_id}", tags[1]), tags
    last = vc.ok("gnt-instance", "list", "--no-headers", "-o", "ha_last_repair", name).strip()
    assert re.fullmatch(rf"failover failure at \d+, jobs {failed_id}", last), last
    # RAPI: the same fields through the query resource
    answer = _rapi_get(vc, "/2/query/instance?fields=name,ha_policy,ha_last_repair")
    assert [[c[1] for c in row] for row in answer["data"]] == [
        [name, "failover (instance)", last]]

    # a failed repair stays until someone clears it; a repair whose job runs stays pending
    vc.ok("gnt-instance", "remove-tags", name, tags[1])
    vc.ok("gnt-instance", "add-tags", name, f"{P}pending:failover:rid-2:1700000100:{busy}")
    res = upstream_cli.run(vc, str(tmp_path), "harep")
    assert res.returncode == 0 and "Pending repair: 1" in res.stdout, res.stdout + res.stderr
    assert f"{P}pending:failover:rid-2:1700000100:{busy}" in vc.ok(
        "gnt-instance", "list-tags", name).split()
    vc.ok("gnt-job", "cancel", "--yes-do-it", "--kill", str(busy))


# --- repairs, on the guest cluster ---------------------------------------------------------

def _harep(gc: GuestClusterFixture, *args: str) -> str:
    res = gc.ssh(N1, [HAREP, f"-L{GUEST_SOCKET}", "--job-delay=1", *args], timeout=300)
    assert not res.failed, res.stdout + res.stderr
    return str(res.stdout)


def _wait_jobs(gc: GuestClusterFixture, jobs: list[str], timeout: float = 300.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        states = _ok(gc.gnt("gnt-job", "list", "--no-headers", "-o", "status", *jobs)).split()
        if all(s in ("success", "error", "canceled") for s in states):
            return states
        assert time.monotonic() < deadline, states
        time.sleep(2)


def _pending_jobs(tags: list[str]) -> list[str]:
    (pending,) = [t for t in tags if t.startswith(P + "pending:")]
    return pending.rsplit(":", 1)[1].split("+")


def _list(gc: GuestClusterFixture, fields: str, name: str) -> list[str]:
    return _ok(gc.gnt("gnt-instance", "list", "--no-headers", "--separator=|", "-o", fields,
                      name)).strip().split("|")


def _volumes(gc: GuestClusterFixture, node: str) -> set[str]:
    res = gc.ssh(node, "lvs --noheadings -o vg_name,lv_name")
    assert not res.failed, res.stderr
    return {"/".join(line.split()) for line in res.stdout.splitlines() if line.strip()}


def test_harep_fails_over_a_drbd_instance_whose_primary_is_offline(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    if not os.path.exists(HAREP):
        pytest.skip(f"{HAREP} is missing ({' and '.join(upstream_cli.PACKAGES)}: make "
                    "compat-deps)")
    drbd, plain, held = "harep-d.vcluster", "harep-p.vcluster", "harep-s.vcluster"
    stopped = False
    offline = False
    volumes = _volumes(gc, "node2")
    try:
        for name, template, nodes in ((drbd, "drbd", f"{N2}:{N3}"), (held, "drbd", f"{N2}:{N3}"),
                                      (plain, "plain", N2)):
            _ok(gc.gnt("gnt-instance", "add", "-t", template, "-o", "tinyos", "--disk",
                       "0:size=64m", "-n", nodes, "--no-name-check", "--no-ip-check", name))
        _ok(gc.gnt("gnt-instance", "add-tags", drbd, P + "failover", P + "reinstall"))
        _ok(gc.gnt("gnt-instance", "add-tags", plain, P + "fix-storage"))
        _ok(gc.gnt("gnt-instance", "add-tags", held, P + "failover", P + "suspend:"))
        assert _list(gc, "ha_policy", drbd) == ["failover (instance)"]
        assert _list(gc, "ha_policy", held) == ["suspended (instance)"]

        # nothing is broken yet: harep submits nothing
        out = _harep(gc)
        assert "Healthy: 3" in out, out
        assert _tags(_ok(gc.gnt("gnt-instance", "list-tags", drbd))) == [P + "failover",
                                                                          P + "reinstall"]

        # node2 dies and the operator marks it offline
        _ok(gc.vcluster("stop", gc.directory, "node2"))
        stopped = True
        _ok(gc.gnt("gnt-node", "modify", "-O", "yes", "--force", N2))
        offline = True

        out = _harep(gc)
        assert f"Executing ArFailover repair on {drbd}" in out, out
        assert (f"Not performing a repair of type ArReinstall on {plain} because only repairs"
                " up to ArFixStorage are allowed") in out, out
        assert f"Not repairing {held} because it's in state ArSuspended Forever" in out, out
        tags = _tags(_ok(gc.gnt("gnt-instance", "list-tags", drbd)))
        jobs = _pending_jobs(tags)
        assert _list(gc, "ha_last_repair", drbd)[0].startswith("failover pending since")
        summary = _ok(gc.gnt("gnt-job", "list", "--no-headers", "-o", "summary", *jobs))
        assert f"INSTANCE_FAILOVER({drbd})" in summary
        assert _wait_jobs(gc, jobs) == ["success"] * len(jobs)
        assert _list(gc, "pnode,snodes,status", drbd) == [N3, N2, "running"]
        # the plain instance: a result without jobs, nothing submitted
        ptags = _ok(gc.gnt("gnt-instance", "list-tags", plain)).split()
        assert any(re.fullmatch(rf"{P}result:reinstall:[-0-9a-f]+:\d+:enoperm:", t)
                   for t in ptags), ptags
        assert _list(gc, "pnode", plain) == [N2]
        assert not [t for t in _ok(gc.gnt("gnt-instance", "list-tags", held)).split()
                    if ":pending:" in t or ":result:" in t]

        # next run: the failover's result, then a new secondary (fix-storage)
        out = _harep(gc)
        assert re.search(rf'"{P}result:failover:[-0-9a-f]+:\d+:success:{"[+]".join(jobs)}"',
                         out), out
        assert f"Executing ArFixStorage repair on {drbd}" in out, out
        jobs = _pending_jobs(_tags(_ok(gc.gnt("gnt-instance", "list-tags", drbd))))
        assert _wait_jobs(gc, jobs) == ["success"] * len(jobs)
        pnode, snodes = _list(gc, "pnode,snodes", drbd)
        assert (pnode, snodes) == (N3, N1)    # the only other node online

        # last run: healthy, the fix-storage result recorded
        out = _harep(gc)
        assert f'Moving {drbd} from "Pending repair" to "Healthy"' in out, out
        tags = _tags(_ok(gc.gnt("gnt-instance", "list-tags", drbd)))
        assert not [t for t in tags if ":pending:" in t]
        state = _list(gc, "ha_state", drbd)[0]
        assert re.fullmatch(rf"failover \(instance\); last: fix-storage success at \d+, jobs "
                            rf"{'[+]'.join(jobs)}", state), state
    finally:
        if stopped:
            gc.vcluster("start", gc.directory, "node2")
        if offline:
            gc.gnt("gnt-node", "modify", "-O", "no", "--force", N2)
        for name in (drbd, plain, held):
            gc.gnt("gnt-instance", "remove", "-f", "--ignore-failures", name)
        # the failover left the dead primary's volumes there (as Ganeti's): the next
        # tests get node2 as they found it
        for volume in sorted(_volumes(gc, "node2") - volumes):
            gc.ssh("node2", ["lvremove", "-f", volume])
