"""``gnt-storage`` through the real daemons (doc/commands.md, "gnt-storage").

A 2-node virtual cluster, node2 in a group of its own.  Providers are
directories in the nodes' ExtStorage search path: ``pool`` valid on both
nodes (its parameters differ: only the common one is reported), ``half``
valid on node1 and without its ``grow`` script on node2, ``lone`` only on
node1.  Ganeti's layouts of ``diagnose`` and ``info`` are checked line by
line, and the same data through OP_QUERY of the ``extstorage`` resource.
"""

from __future__ import annotations

import pytest
from extstorage_helpers import make_provider
from vcluster_harness import VirtualCluster

from ganeti import constants, luxi

pytestmark = pytest.mark.timeout(600)

N1, N2 = "node1.vcluster", "node2.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcst"), nodes=2, use_ssh=False) as cluster:
        res = cluster.run("gnt-storage", "diagnose")
        assert res.returncode == 1 and "Can't get the list of ExtStorage providers" in res.stderr
        cluster.ok("gnt-group", "add", "other")
        cluster.ok("gnt-group", "assign-nodes", "other", N2)
        make_provider(cluster, N1, "pool", params="size Size in MiB\npool The pool to use\n")
        make_provider(cluster, N2, "pool", params="size Size in MiB\n")
        make_provider(cluster, N1, "half", params="mode Access mode\n")
        make_provider(cluster, N2, "half", params="mode Access mode\n", skip=("grow",))
        make_provider(cluster, N1, "lone")
        yield cluster


def test_diagnose(vc):
    out = vc.ok("gnt-storage", "diagnose")
    p = "/srv/ganeti/extstorage"
    assert out.split("\n") == [
        "Provider: half",
        "---",
        f"  Node: {N1}, status: valid (path: {p}/half) [parameters: mode]",
        f"  Node: {N2}, status: invalid - File 'grow' under path '{p}/half' is missing"
        f" (path: {p}/half) [no parameters]",
        "  --",
        "  For nodegroup: default --> valid",
        "  For nodegroup: other --> invalid",
        "",
        "Provider: lone",
        "---",
        f"  Node: {N1}, status: valid (path: {p}/lone) [no parameters]",
        f"  Node: {N2}, status: ExtStorage provider not found",
        "  --",
        "  For nodegroup: default --> valid",
        "  For nodegroup: other --> invalid",
        "",
        "Provider: pool",
        "---",
        f"  Node: {N1}, status: valid (path: {p}/pool) [parameters: size, pool]",
        f"  Node: {N2}, status: valid (path: {p}/pool) [parameters: size]",
        "  --",
        "  For nodegroup: default --> valid",
        "  For nodegroup: other --> valid",
        "",
        "",
    ]


def test_info(vc):
    out = vc.ok("gnt-storage", "info")
    assert out.split("\n") == [
        "half:", "  - Valid for nodegroups:", "      default",
        "  - Supported parameters:", "      mode: Access mode", "",
        "lone:", "  - Valid for nodegroups:", "      default",
        "  - Supported parameters:", "",
        "pool:", "  - Valid for nodegroups:", "      default", "      other",
        "  - Supported parameters:", "      size: Size in MiB", "",
        "",
    ]
    out = vc.ok("gnt-storage", "info", "nosuch", "pool")
    assert out.split("\n") == [
        "pool:", "  - Valid for nodegroups:", "      default", "      other",
        "  - Supported parameters:", "      size: Size in MiB", "",
        "nosuch: Not Found", "", "",
    ]


def test_offline_node_is_skipped(vc):
    vc.ok("gnt-node", "modify", "--offline=yes", "--force", N2)
    try:
        out = vc.ok("gnt-storage", "diagnose")
        assert N2 not in out and "For nodegroup: other --> valid" in out
    finally:
        vc.ok("gnt-node", "modify", "--offline=no", "--force", N2)


def test_extstorage_query_resource(vc):
    cl = luxi.Client(vc.paths(N1).master_socket)
    res = cl.Query(constants.QR_EXTSTORAGE, ["name", "nodegroup_status", "parameters"],
                   ["=", "name", "pool"])
    assert [[cell[1] for cell in row] for row in res["data"]] == [
        ["pool", {"default": True, "other": True}, [["size", "Size in MiB"]]]]
    fields = cl.QueryFields(constants.QR_EXTSTORAGE, None)
    assert [f["name"] for f in fields["fields"]] == ["name", "node_status", "nodegroup_status",
                                                     "parameters"]
