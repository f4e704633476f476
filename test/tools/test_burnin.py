"""tools/burnin against a fake LUXI client: options, step order and skips, -p, failures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeLuxi
from fakes.clock import FakeClock

from ganeti import constants, errors
from ganeti.tools import burnin, burnin_opts
from ganeti.tools.burnin_steps import STEP_NAMES

NODES = ["node1", "node2", "node3"]
INSTANCES = ["i1", "i2", "i3"]
NOCHECK = ["--no-name-check", "--no-ip-check"]


class SimLuxi(FakeLuxi):
    """A simulated queue behind the table-shaped fake: jobs finish at once (each costs
    one fake second); ``fail`` picks failing opcodes."""

    def __init__(self, clock: FakeClock, *, nodes: list[str] | None = None,
                 fail: Callable[[dict[str, Any]], str | None] | None = None,
                 nic_mode: str = constants.NIC_MODE_BRIDGED,
                 templates: tuple[str, ...] = ("diskless", "file", "sharedfile")) -> None:
        super().__init__()
        self.answer_with(SubmitJob=self._submit_job, SubmitManyJobs=self._submit_many_jobs,
                         WaitForJobChange=self._wait_for_job_change,
                         QueryJobs=self._query_jobs, Query=self._query,
                         QueryNodes=self._query_nodes, QueryClusterInfo=self._cluster_info)
        self.clock = clock
        self.nodes = nodes if nodes is not None else list(NODES)
        self.fail = fail or (lambda op: None)
        self.nic_mode = nic_mode
        self.templates = list(templates)
        self.jobs: dict[int, list[dict[str, Any]]] = {}
        self.submissions: list[tuple[str, list[int]]] = []   # (SubmitJob|SubmitManyJobs, ids)
        self.results: dict[int, tuple[str, list[str], list[Any]]] = {}
        self.existing: dict[str, str] = {}       # instance -> primary node

    def _run(self, ops: list[dict[str, Any]]) -> int:
        job_id = len(self.jobs) + 1
        self.jobs[job_id] = ops
        statuses, results = [], []
        failed = False
        for op in ops:
            why = None if failed else self.fail(op)
            if failed:
                statuses.append("error")
                results.append("Unclean master daemon shutdown")
            elif why:
                failed = True
                statuses.append("error")
                results.append(["OpExecError", [why]])
            else:
                name = op.get("instance_name", "")
                if op["OP_ID"] == "OP_INSTANCE_CREATE":
                    self.existing[name] = op.get("pnode") or self.nodes[0]
                elif op["OP_ID"] == "OP_INSTANCE_REMOVE":
                    self.existing.pop(name, None)
                elif op.get("target_node"):
                    self.existing[name] = op["target_node"]
                statuses.append("success")
                results.append([["tinyos", ["default", "minimal", "compact"], False]]
                               if op["OP_ID"] == "OP_OS_DIAGNOSE" else None)
        self.results[job_id] = ("error" if failed else "success", statuses, results)
        return job_id

    def _submit_job(self, ops: list[dict[str, Any]]) -> int:
        job_id = self._run(ops)
        self.submissions.append(("SubmitJob", [job_id]))
        return job_id

    def _submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
        ids = [self._run(ops) for ops in jobs]
        self.submissions.append(("SubmitManyJobs", ids))
        return [[True, i] for i in ids]

    def _wait_for_job_change(self, job_id: int, fields: list[str], prev: Any, serial: int,
                             timeout: float) -> Any:
        self.clock.advance(1.0)
        status = self.results[job_id][0]
        return [[status], [[1, [1700000000, 0], "message", f"job {job_id} log line"]]]

    def _query_jobs(self, ids: list[int], fields: list[str]) -> list[Any]:
        return [list(self.results[i]) for i in ids]

    def _query(self, what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
        assert what == "instance" and qfilter is None
        values = {"name": lambda n: n, "pnode": lambda n: self.existing[n]}
        return {"fields": [], "data": [[[0, values[f](n)] for f in fields]
                                       for n in sorted(self.existing)]}

    def _query_nodes(self, names: list[str], fields: list[str], lock: bool) -> list[Any]:
        return [[n, False, False] for n in (names or self.nodes)]

    def _cluster_info(self) -> dict[str, Any]:
        return {"default_hypervisor": "fake", "enabled_disk_templates": self.templates,
                "nicparams": {"default": {"mode": self.nic_mode, "link": "br0"}}}

    # helpers for the assertions ------------------------------------------------
    def removals(self) -> list[str]:
        """The instances of the remove step's jobs (export-import also removes)."""
        return [job[0]["instance_name"] for job in self.jobs.values()
                if len(job) == 1 and job[0]["OP_ID"] == "OP_INSTANCE_REMOVE"]

    def ops(self, op_id: str | None = None) -> list[dict[str, Any]]:
        return [op for job in self.jobs.values() for op in job
                if op_id is None or op["OP_ID"] == op_id]


def _run(argv: list[str], client: SimLuxi, clock: FakeClock) -> tuple[int, list[str], list[str]]:
    out: list[str] = []
    err: list[str] = []
    opts = burnin_opts.parse_args(argv)
    burner = burnin.Burner(opts, client, out=out.append, err=err.append, clock=clock)
    burner.read_state()
    return burner.run(), "\n".join(out).splitlines(), err


def _steps_run(lines: list[str]) -> list[str]:
    return [line[2:] for line in lines if line.startswith("- ")]


def _timing_rows(lines: list[str]) -> dict[str, list[str]]:
    start = lines.index("- Step timings") + 2
    return {row.split()[0]: row.split()[1:] for row in lines[start:]}


# --- options ---------------------------------------------------------------------

def test_defaults_are_upstreams() -> None:
    o = burnin_opts.parse_args(["-o", "tinyos", "i1"])
    assert (o.disk_template, o.disk_size, o.disk_growth) == ("drbd", [1024], [128])
    assert (o.minmem_size, o.maxmem_size, o.vcpu_count) == (128, 256, 3)
    assert o.reboot_types == ["soft", "hard", "full"]
    assert o.nics == [{}] and o.net_timeout == 15 and not o.parallel
    assert all(getattr(o, dest) for dest, _ in burnin_opts.STEP_SWITCHES.values())
    assert o.name_check and o.ip_check and not o.keep_instances and o.rename is None


@pytest.mark.parametrize("switch", sorted(burnin_opts.STEP_SWITCHES))
def test_every_no_step_switch(switch: str) -> None:
    o = burnin_opts.parse_args(["-o", "tinyos", "-t", "file", f"--no-{switch}", "i1"])
    dest = burnin_opts.STEP_SWITCHES[switch][0]
    assert getattr(o, dest) is False
    others = [d for s, (d, _) in burnin_opts.STEP_SWITCHES.items() if s != switch]
    assert all(getattr(o, d) for d in others)


def test_sizes_memory_hypervisor_and_lists() -> None:
    o = burnin_opts.parse_args(["-o", "tinyos", "-t", "file", "--disk-size", "16M,1G",
                                "--disk-growth", "8m,0", "--mem-size", "512M", "-H",
                                "fake:migration_mode=non-live", "-O", "a=1", "-n", "n1,n2",
                                "--reboot-types", "hard", "--no-nics", "i1", "i2"])
    assert (o.disk_size, o.disk_growth) == ([16, 1024], [8, 0])
    assert (o.minmem_size, o.maxmem_size) == (512, 512)
    assert (o.hypervisor, o.hvparams, o.osparams) == ("fake", {"migration_mode": "non-live"},
                                                      {"a": "1"})
    assert o.nodes == ["n1", "n2"] and o.reboot_types == ["hard"] and o.nics == []
    assert o.instances == ["i1", "i2"]


def test_diskless_has_no_disks_and_no_disk_additions() -> None:
    o = burnin_opts.parse_args(["-o", "tinyos", "-t", "diskless", "i1"])
    assert o.disk_size == [] and o.disk_growth == [] and not o.do_addremove_disks


@pytest.mark.parametrize("argv, message", [
    (["i1"], "Usage"),
    (["-o", "tinyos"], "Usage"),
    (["-o", "x", "-t", "file", "--disk-size", "1G,2G", "i1"], "sizes/growth"),
    (["-o", "x", "-n", "n1", "-I", "hail", "i1"], "not both"),
    (["-o", "x", "--minmem-size", "512", "--maxmem-size", "256", "i1"], "lower than"),
    (["-o", "x", "--reboot-types", "soft,warm", "i1"], "warm"),
    (["-o", "x", "-C", "--no-name-check", "i1"], "HTTP checks"),
    (["-o", "x", "i1", "i1"], "unique"),
    (["-o", "x", "--rename", "i1", "i1"], "--rename"),
], ids=["no-os", "no-instance", "growth-count", "nodes-and-iallocator", "min-over-max",
        "reboot-type", "http-without-names", "duplicate", "rename-in-use"])
def test_bad_combinations(argv: list[str], message: str) -> None:
    with pytest.raises(errors.OpPrereqError, match=message):
        burnin_opts.parse_args(argv)


def test_main_bad_usage_exits_2(capsys: Any) -> None:
    assert burnin.main(["-o", "tinyos"]) == 2
    assert "Usage" in capsys.readouterr().err


# --- a full run ------------------------------------------------------------------

def test_diskless_run_order_skips_and_placement() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    rc, lines, err = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, "--rename", "spare",
                           *INSTANCES], cl, clock)
    assert rc == 0 and err == []
    steps = _steps_run(lines)
    assert steps[0] == "Testing global parameters"
    assert steps[1:] == [
        "Creating instances", "Setting instance runtime memory",
        "Skipping disk growth (disk template diskless has no growable disks)",
        "Skipping disk replacement on the same nodes (disk template diskless is not"
        " internally mirrored)",
        "Skipping secondary node change (disk template diskless is not internally"
        " mirrored)",
        "Failing over instances",
        "Skipping move (disk template diskless is mirrored, its instances fail over instead)",
        "Migrating instances", "Exporting and re-importing instances",
        "Reinstalling instances", "Rebooting instances", "Renaming instances",
        "Renaming the instances to their own name", "Activating/deactivating disks",
        "Skipping disk addition/removal (diskless instances have no disks)",
        "Adding and removing NICs",
        "Skipping confd queries (this cluster runs no confd daemon)",
        "Stopping and starting instances", "Removing instances", "Step timings"]
    creates = cl.ops("OP_INSTANCE_CREATE")
    assert [(o["instance_name"], o["pnode"], o["mode"]) for o in creates[:3]] == \
        [("i1", "node1", "create"), ("i2", "node2", "create"), ("i3", "node3", "create")]
    assert all("snode" not in o for o in creates)
    assert creates[0]["beparams"] == {"minmem": 128, "maxmem": 256, "vcpus": 3}
    assert creates[0]["disks"] == [] and creates[0]["nics"] == [{}]
    assert creates[0]["name_check"] is False and creates[0]["ip_check"] is False
    assert "    on node2" in lines
    # every step has a row, in order, and the remove step removed all three
    assert list(_timing_rows(lines)) == [*STEP_NAMES, "total"]
    assert cl.removals() == INSTANCES
    # every job carries burnin's reason
    assert all(op["reason"][0][:2] == ["gnt:client:burnin", "burnin"] for op in cl.ops())


def test_export_import_job_uses_upstream_opcodes() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    rc, lines, _ = _run(["-o", "tinyos", "-t", "file", *NOCHECK, "--disk-size", "16M",
                         "--disk-growth", "8M", *INSTANCES], cl, clock)
    assert rc == 0
    (job,) = [ops for ops in cl.jobs.values() if ops[0]["OP_ID"] == "OP_BACKUP_EXPORT"][:1]
    assert [o["OP_ID"] for o in job] == ["OP_BACKUP_EXPORT", "OP_INSTANCE_REMOVE",
                                         "OP_INSTANCE_CREATE", "OP_BACKUP_REMOVE"]
    export, remove, create, remove_export = job
    assert (export["instance_name"], export["target_node"], export["mode"],
            export["shutdown"]) == ("i1", "node3", "local", True)
    assert remove["ignore_failures"] is True
    assert (create["mode"], create["src_node"], create["src_path"], create["pnode"]) == \
        ("import", "node3", "i1", "node1")
    # the import declares the disks as grown (16 + 8): they must hold the exported images
    assert create["disks"] == [{"size": 24}] and create["disk_template"] == "file"
    creates = [ops[0] for ops in cl.jobs.values() if ops[0]["OP_ID"] == "OP_INSTANCE_CREATE"]
    assert creates and all(op["disks"] == [{"size": 16}] for op in creates)
    assert remove_export == {"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "i1",
                             "reason": remove_export["reason"]}
    assert "    import from node3 to node1" in lines


def test_file_template_moves_and_grows_but_does_not_fail_over() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    rc, lines, _ = _run(["-o", "tinyos", "-t", "file", *NOCHECK, "--disk-size", "16M,8M",
                         "--disk-growth", "8M,0", "i1", "i2"], cl, clock)
    assert rc == 0
    rows = _timing_rows(lines)
    assert rows["failover"][0] == rows["migrate"][0] == "skipped"
    assert rows["move"][0] == rows["grow-disks"][0] == rows["add-remove-disks"][0] == "done"
    assert [(o["instance_name"], o["target_node"]) for o in cl.ops("OP_INSTANCE_MOVE")] == \
        [("i1", "node2"), ("i2", "node3")]
    # only the disks with a growth are grown
    assert [(o["instance_name"], o["disk"], o["amount"])
            for o in cl.ops("OP_INSTANCE_GROW_DISK")] == [("i1", 0, 8), ("i2", 0, 8)]


def test_one_node_option_set_leaves_no_unexplained_skip() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, nodes=["node1"])
    argv = ["-o", "tinyos", "-t", "diskless", *NOCHECK, "--no-failover", "--no-migrate",
            "--no-move", "--no-replace1", "--no-replace2", "--no-reinstall",
            "--no-importexport", "--no-activate-disks", "--no-add-disks", "i1", "i2"]
    rc, lines, _ = _run(argv, cl, clock)
    assert rc == 0
    skips = [s for s in _steps_run(lines) if s.startswith("Skipping")]
    assert "Skipping failover (--no-failover given)" in skips
    assert all(s.endswith(")") and "(" in s for s in skips)
    assert cl.ops("OP_INSTANCE_FAILOVER") == [] and cl.ops("OP_INSTANCE_REINSTALL") == []
    assert {o["pnode"] for o in cl.ops("OP_INSTANCE_CREATE")} == {"node1"}


def test_routed_cluster_skips_nic_changes_with_the_reason() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, nic_mode=constants.NIC_MODE_ROUTED)
    rc, lines, _ = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, "i1"], cl, clock)
    assert rc == 0
    assert "- Skipping NIC addition/removal (the cluster's default NIC mode is routed, not" \
           " bridged)" in lines


def test_template_not_enabled_refused_before_any_job() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, templates=("diskless",))
    opts = burnin_opts.parse_args(["-o", "tinyos", "-t", "file", "i1"])
    with pytest.raises(errors.OpPrereqError, match="not enabled"):
        burnin.Burner(opts, cl, out=lambda s: None, clock=clock).read_state()
    assert cl.ops("OP_INSTANCE_CREATE") == []


def test_unknown_os_refused() -> None:
    clock = FakeClock()
    opts = burnin_opts.parse_args(["-o", "debootstrap", "-t", "diskless", "i1"])
    with pytest.raises(errors.OpPrereqError, match="debootstrap"):
        burnin.Burner(opts, SimLuxi(clock), out=lambda s: None, clock=clock).read_state()


# --- serial and parallel --------------------------------------------------------

def test_serial_submits_one_job_at_a_time() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES], cl, clock)
    assert {kind for kind, _ in cl.submissions} == {"SubmitJob"}


def test_parallel_submits_each_step_together_and_is_faster() -> None:
    argv = ["-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES]
    clock = FakeClock()
    serial = SimLuxi(clock)
    _, serial_lines, _ = _run(argv, serial, clock)
    clock = FakeClock()
    cl = SimLuxi(clock)
    rc, lines, _ = _run(["-p", *argv], cl, clock)
    assert rc == 0
    many = [ids for kind, ids in cl.submissions if kind == "SubmitManyJobs"]
    assert many and all(len(ids) == 3 for ids in many)
    # the OS diagnose is the only single job
    assert [cl.jobs[ids[0]][0]["OP_ID"] for kind, ids in cl.submissions if kind == "SubmitJob"] \
        == ["OP_OS_DIAGNOSE"]
    # the same jobs either way
    assert sorted(o["OP_ID"] for o in cl.ops()) == sorted(o["OP_ID"] for o in serial.ops())
    assert _timing_rows(lines)["total"][-1] == _timing_rows(serial_lines)["total"][-1]


def test_step_times_come_from_the_clock() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    _, lines, _ = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, "i1", "i2"], cl, clock)
    rows = _timing_rows(lines)
    # each job costs one fake second in the fake
    assert rows["create"] == ["done", "2", "2.000s"]
    assert rows["grow-disks"] == ["skipped", "0", "-"]


# --- failures --------------------------------------------------------------------

def _fail_on(op_id: str, instance: str, message: str = "node2: disk full"
             ) -> Callable[[dict[str, Any]], str | None]:
    def fail(op: dict[str, Any]) -> str | None:
        return message if op["OP_ID"] == op_id and op.get("instance_name") == instance \
            else None
    return fail


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_failure_stops_removes_what_was_created_and_exits_1(parallel: bool) -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, fail=_fail_on("OP_INSTANCE_REBOOT", "i2"))
    argv = ["-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES]
    rc, lines, err = _run((["-p"] if parallel else []) + argv, cl, clock)
    assert rc == 1
    (msg,) = err
    assert "reboot" in msg and "i2" in msg and "node2: disk full" in msg
    assert msg.startswith("burnin: reboot: job ")
    steps = _steps_run(lines)
    assert "Error detected: opcode buffer follows:" in steps
    assert steps[steps.index("Rebooting instances") + 2] == "Removing instances"
    assert cl.ops("OP_INSTANCE_RENAME") == []            # nothing after the failure
    assert cl.removals() == INSTANCES
    rows = _timing_rows(lines)
    assert rows["reboot"][0] == "failed" and rows["remove"][0] == "done"
    assert "rename-same" not in rows


def test_keep_instances_keeps_them_after_a_failure() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, fail=_fail_on("OP_INSTANCE_FAILOVER", "i1"))
    rc, lines, err = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, "-K", *INSTANCES],
                          cl, clock)
    assert rc == 1 and err
    assert cl.removals() == []
    assert "- Skipping instance removal (--keep-instances given)" in lines


def test_parallel_create_failure_removes_only_the_created_ones() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock, fail=_fail_on("OP_INSTANCE_CREATE", "i2", "OS create failed"))
    rc, _, err = _run(["-p", "-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES],
                      cl, clock)
    assert rc == 1 and "OS create failed" in err[0]
    assert cl.removals() == ["i1", "i3"]


def test_verbose_prints_the_job_log() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    _, lines, _ = _run(["-v", "-o", "tinyos", "-t", "diskless", *NOCHECK, "i1"], cl, clock)
    assert any(line.startswith("        ") and line.endswith("job 2 log line")
               for line in lines)


def test_failed_import_leaves_the_instance_gone_and_the_others_removed() -> None:
    def fail(op: dict[str, Any]) -> str | None:
        if op["OP_ID"] == "OP_INSTANCE_CREATE" and op["mode"] == "import" \
                and op["instance_name"] == "i2":
            return "import script failed"
        return None
    clock = FakeClock()
    cl = SimLuxi(clock, fail=fail)
    rc, lines, err = _run(["-o", "tinyos", "-t", "file", *NOCHECK, *INSTANCES], cl, clock)
    assert rc == 1 and "export-import" in err[0] and "import script failed" in err[0]
    assert "  * instance i2 (gone already)" in lines
    assert cl.removals() == ["i1", "i3"] and cl.existing == {}


def test_removal_goes_on_past_a_failed_removal() -> None:
    def fail(op: dict[str, Any]) -> str | None:
        return "node1 is down" if op["OP_ID"] == "OP_INSTANCE_REMOVE" \
            and op["instance_name"] == "i1" else None
    clock = FakeClock()
    cl = SimLuxi(clock, fail=fail)
    rc, lines, err = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, "--no-importexport",
                           *INSTANCES], cl, clock)
    assert rc == 1 and err[0].startswith("burnin: remove: job ") and "node1 is down" in err[0]
    assert cl.removals() == INSTANCES and list(cl.existing) == ["i1"]
    assert _timing_rows(lines)["remove"][0] == "failed"


def test_failover_and_migration_targets_stay_within_the_selected_nodes() -> None:
    clock = FakeClock()
    cl = SimLuxi(clock)
    rc, _, _ = _run(["-o", "tinyos", "-t", "sharedfile", *NOCHECK, "-n", "node1,node3",
                     "--disk-size", "8M", "--disk-growth", "4M", "i1", "i2", "i3"], cl, clock)
    assert rc == 0
    assert [o["pnode"] for o in cl.ops("OP_INSTANCE_CREATE")][:3] == ["node1", "node3", "node1"]
    assert [o["target_node"] for o in cl.ops("OP_INSTANCE_FAILOVER")] == \
        ["node3", "node1", "node3"]
    migrations = [o for o in cl.ops("OP_INSTANCE_MIGRATE") if not o["cleanup"]]
    assert [o["target_node"] for o in migrations] == ["node1", "node3", "node1"]
    assert all("target_node" not in o for o in cl.ops("OP_INSTANCE_MIGRATE") if o["cleanup"])


# --- -C/--http-check ----------------------------------------------------------------

@pytest.fixture
def web() -> Any:
    """A local web server answering /hostname.txt with whatever the test sets."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        body = b""

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            self.send_response(200 if self.path == "/hostname.txt" else 404)
            self.end_headers()
            self.wfile.write(Handler.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, Handler
    finally:
        server.shutdown()
        server.server_close()


def _http_burner(name: str, clock: FakeClock) -> burnin.Burner:
    opts = burnin_opts.parse_args(["-o", "tinyos", "-t", "diskless", "-C", "--net-timeout",
                                   "3", name])
    return burnin.Burner(opts, SimLuxi(clock), out=lambda s: None, clock=clock,
                         sleep=clock.advance)


def test_http_check_accepts_the_instance_serving_its_name(web: Any) -> None:
    server, handler = web
    name = f"127.0.0.1:{server.server_address[1]}"
    handler.body = f"{name}\n".encode()
    _http_burner(name, FakeClock()).check_alive(name)


def test_http_check_refuses_another_name(web: Any) -> None:
    server, handler = web
    name = f"127.0.0.1:{server.server_address[1]}"
    handler.body = b"someone-else\n"
    with pytest.raises(burnin.BurninFailure, match="Hostname mismatch"):
        _http_burner(name, FakeClock()).check_alive(name)


def test_http_check_gives_up_after_the_net_timeout(web: Any) -> None:
    server, _ = web
    name = f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    clock = FakeClock()
    with pytest.raises(burnin.BurninFailure, match="Cannot contact"):
        _http_burner(name, clock).check_alive(name)
    assert clock.now >= 1003.0


def test_a_failed_query_inside_a_step_still_cleans_up() -> None:
    clock = FakeClock()

    class QueryDown(SimLuxi):
        def _query(self, what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
            if fields == ["name", "pnode"]:
                raise errors.LuxiError("master socket closed")
            return super()._query(what, fields, qfilter)
    cl = QueryDown(clock)
    rc, _, err = _run(["-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES], cl, clock)
    assert rc == 1 and err[0].startswith("burnin: failover: (cluster): ")
    assert "master socket closed" in err[0]
    assert cl.removals() == INSTANCES and cl.existing == {}


def test_a_refused_submission_in_parallel_is_a_failure() -> None:
    clock = FakeClock()

    class Refusing(SimLuxi):
        def _submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
            answers = []
            for ops in jobs:
                if ops[0]["OP_ID"] == "OP_INSTANCE_CREATE" and ops[0]["instance_name"] == "i2":
                    answers.append([False, ["OpPrereqError", ["queue is drained", "wrong_state"]]])
                else:
                    answers.append([True, self._submit_job(ops)])
            return answers
    cl = Refusing(clock)
    rc, _, err = _run(["-p", "-o", "tinyos", "-t", "diskless", *NOCHECK, *INSTANCES], cl, clock)
    assert rc == 1
    assert err[0].startswith("burnin: create: i2: cannot submit the job: ")
    assert "queue is drained" in err[0]
    assert cl.removals() == ["i1", "i3"]


def test_drbd_pairs_nodes_replaces_on_each_side_and_onto_a_third_node() -> None:
    """The drbd run of the guest cluster (test_guest_burnin.py), its choices checked here
    for every step: a primary and a secondary per instance, replace-disks on the
    secondary then the primary, a new secondary that is neither node, failover and
    migration to the secondary (no target), an import onto both nodes again."""
    clock = FakeClock()
    cl = SimLuxi(clock, templates=("drbd", "plain"))
    rc, lines, _ = _run(["-o", "tinyos+compact", "-t", "drbd", *NOCHECK, "--disk-size", "32M",
                         "--disk-growth", "8M", "--rename", "spare", "i1", "i2"], cl, clock)
    assert rc == 0
    rows = _timing_rows(lines)
    for step in ("create", "grow-disks", "replace1", "replace2", "failover", "migrate",
                 "export-import", "reboot", "rename", "activate-disks", "remove"):
        assert rows[step][0] == "done", (step, rows[step])
    assert rows["move"][0] == "skipped"
    creates = [ops[0] for ops in cl.jobs.values() if ops[0]["OP_ID"] == "OP_INSTANCE_CREATE"]
    pairs = [(o["pnode"], o["snode"]) for o in creates[:2]]
    assert pairs == [("node1", "node2"), ("node2", "node3")]
    replaces = cl.ops("OP_INSTANCE_REPLACE_DISKS")
    same = [(o["instance_name"], o["mode"]) for o in replaces if o["mode"] != "replace_new_secondary"]
    assert same == [("i1", "replace_on_secondary"), ("i1", "replace_on_primary"),
                    ("i2", "replace_on_secondary"), ("i2", "replace_on_primary")]
    new = {o["instance_name"]: o["remote_node"] for o in replaces
           if o["mode"] == "replace_new_secondary"}
    assert new == {"i1": "node3", "i2": "node1"}      # the node that is neither of the pair
    assert all("target_node" not in o for o in cl.ops("OP_INSTANCE_FAILOVER"))
    assert all("target_node" not in o for o in cl.ops("OP_INSTANCE_MIGRATE"))
    imp = next(o for o in cl.ops("OP_INSTANCE_CREATE") if o["mode"] == "import")
    assert imp["disk_template"] == "drbd" and imp["snode"] and imp["snode"] != imp["pnode"]
