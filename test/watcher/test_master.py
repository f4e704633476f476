"""ganeti.watcher.master: the master's pass against a fake LUXI client."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fakes import FakeClock, FakeLuxi

from ganeti import constants
from ganeti.pathutils import Paths
from ganeti.watcher import master, state


def _cells(*values: Any) -> list[list[Any]]:
    return [[constants.RS_NORMAL, v] if v is not None else [constants.RS_NODATA, None]
            for v in values]


class WatcherLuxi(FakeLuxi):
    """Answers the watcher's queries from tables; runs its verify-disks jobs at once."""

    def __init__(self, instances: list[tuple[Any, ...]], locks: list[tuple[Any, ...]] = ()):
        super().__init__()
        self.answer_with(Query=self._query, SubmitManyJobs=self._submit_many,
                         WaitForJobChange=self._wait, QueryJobs=self._query_jobs,
                         ArchiveJob=self._archive, AutoArchiveJobs=self._auto_archive)
        self.tables = {
            constants.QR_GROUP: [("g1", "default")],
            constants.QR_NODE: [("n1", "g1", False, "b1"), ("n2", "g1", False, None)],
            constants.QR_INSTANCE: instances,
            constants.QR_LOCK: list(locks),
        }
        self.archived: list[list[Any]] = []
        #: verify-disks: the jobs, each group's result (default: clean), the status
        self.verify_jobs: dict[int, dict[str, Any]] = {}
        self.verify_results: dict[str, list[Any]] = {}
        self.verify_status = constants.JOB_STATUS_SUCCESS
        self.archived_jobs: list[int] = []
        #: (method, read timeout asked for) of every call, in order
        self.read_timeouts: list[tuple[str, float | None]] = []

    def call(self, method: str, args: list[Any], *, timeout: float | None = None) -> Any:
        self.read_timeouts.append((method, timeout))
        return super().call(method, args, timeout=timeout)

    @property
    def submitted(self) -> list[list[dict[str, Any]]]:
        """The jobs submitted, but the verify-disks ones."""
        return [job for job in super().submitted if job[0]["OP_ID"] != "OP_GROUP_VERIFY_DISKS"]

    def _query(self, what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
        return {"fields": [], "data": [_cells(*row) for row in self.tables[what]]}

    def _submit_many(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
        if all(job[0]["OP_ID"] == "OP_GROUP_VERIFY_DISKS" for job in jobs):
            ids = [900 + len(self.verify_jobs) + k for k in range(len(jobs))]
            self.verify_jobs.update({i: job[0] for i, job in zip(ids, jobs)})
            return [[True, i] for i in ids]
        return [[True, 100 + k] for k in range(len(jobs))]

    def _wait(self, job_id: int, *_args: Any) -> Any:
        assert job_id in self.verify_jobs
        return [[self.verify_status], [[1, [0, 0], "message", "WARNING: planted"]]]

    def _query_jobs(self, job_ids: list[int], fields: list[str]) -> list[Any]:
        (job,) = job_ids
        group = self.verify_jobs[job]["group_name"]
        return [[self.verify_status, [self.verify_results.get(group, [{}, [], {}])]]]

    def _archive(self, job_id: int) -> bool:
        self.archived_jobs.append(job_id)
        return True

    def _auto_archive(self, age: float, timeout: float) -> list[int]:
        self.archived.append([age, timeout])
        return [3, 0]


def _inst(name: str, status: str, pnode: str = "n1",
          source: str = "admin") -> tuple[Any, ...]:
    return (name, status, "up", pnode, "g1", [], "file", source)


def test_pass_submits_jobs_with_the_watcher_reason(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("a", "ERROR_down"), _inst("b", "USER_down"), _inst("c", "running"),
                   _inst("d", "ERROR_down", pnode="n2")])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    report = master.master_pass(cl, paths, master.MasterOptions(job_age=60.0),
                                clock=FakeClock(5000.0))
    ops = [(job[0]["OP_ID"], job[0]["instance_name"]) for job in cl.submitted]
    assert ops == [("OP_INSTANCE_STARTUP", "a"), ("OP_INSTANCE_SHUTDOWN", "b")]
    assert cl.submitted[1][0]["admin_state_source"] == constants.USER_SOURCE
    assert all(job[0]["reason"][0][:2][0] == "gnt:watcher" for job in cl.submitted)
    assert cl.submitted[0][0]["reason"][0][2] == 5000 * 10**9
    (group,) = report.groups
    assert group.jobs == {"a": 100, "b": 101}
    assert group.plan.skipped == [("d", "primary node n2 is down")]
    assert cl.archived == [[60.0, 30.0]] and report.archived == 3
    saved = state.load_state(paths.watcher_state_file("g1"))
    assert sorted(saved.attempts) == ["a", "b"] and saved.bootids == {"n1": "b1"}
    status = Path(paths.watcher_instance_status_file).read_text()
    assert status == "a ERROR_down\nb USER_down\nc running\nd ERROR_down\n"


def test_instances_locked_by_a_job_are_skipped(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("a", "ERROR_down"), _inst("b", "ERROR_down"), _inst("c", "ERROR_down")],
                  locks=[("instance/a", ["job-7"], []),
                         ("instance/b", [], [["exclusive", ["job-8"]]]),
                         ("instance/c", [], [])])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    report = master.master_pass(cl, paths, master.MasterOptions(), clock=FakeClock())
    assert [job[0]["instance_name"] for job in cl.submitted] == ["c"]
    assert report.groups[0].plan.skipped == [("a", "locked by a job"), ("b", "locked by a job")]


def test_negative_job_age_still_archives_everything_finished(tmp_path: Path) -> None:
    cl = WatcherLuxi([])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    master.master_pass(cl, paths, master.MasterOptions(job_age=-1), clock=FakeClock())
    assert cl.archived == [[-1, 30.0]]


def test_the_pass_gives_its_long_calls_their_own_read_timeouts(tmp_path: Path) -> None:
    """AutoArchiveJobs waits up to 60 s for its answer, a job wait its poll + 10 s; the rest
    the client's default (through the typed methods' read_timeout, never on the wire)."""
    cl = WatcherLuxi([_inst("a", "running")])
    master.master_pass(cl, _paths(tmp_path), master.MasterOptions(), clock=FakeClock(5000.0))
    asked = dict(cl.read_timeouts)
    assert asked["AutoArchiveJobs"] == 60.0
    assert asked["WaitForJobChange"] == 20.0            # a 10 s poll, plus 10 s
    assert asked["Query"] is None and asked["SubmitManyJobs"] is None
    assert cl.archived == [[6 * 3600.0, 30.0]]


def _paths(tmp_path: Path) -> Paths:
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    return paths


def test_verify_disks_runs_per_group_and_activates_inactive_disks(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("a", "running"), _inst("b", "running"), _inst("c", "ERROR_down"),
                   _inst("d", "running", pnode="n2"), _inst("e", "running"),
                   _inst("f", "running")],
                  locks=[("instance/e", ["job-3"], [])])
    cl.verify_results["g1"] = [{}, ["a", "b", "c", "d", "e", "gone"], {"b": [["n1", 0]]}]
    report = master.master_pass(cl, _paths(tmp_path), master.MasterOptions(),
                                clock=FakeClock(5000.0))
    (job,) = cl.verify_jobs.values()
    assert job["group_name"] == "g1" and job["priority"] == constants.OP_PRIO_LOW
    assert job["reason"][0][0] == "gnt:watcher"
    assert cl.archived_jobs == [900]
    # a: activated; b: a disk is missing; c: restarted anyway; d: node down; e: locked
    assert [(j[0]["OP_ID"], j[0]["instance_name"]) for j in cl.submitted] == [
        ("OP_INSTANCE_STARTUP", "c"), ("OP_INSTANCE_ACTIVATE_DISKS", "a")]
    assert "verify-disks" in cl.submitted[1][0]["reason"][0][1]
    # the job follows the resync a reconnected mirror starts (doc/storage.md)
    assert cl.submitted[1][0]["wait_for_sync"] is True
    plan = report.groups[0].plan
    assert plan.inactive_disks == ["a"]
    assert dict(plan.skipped) == {"b": "a disk is missing; not activating its disks",
                                  "d": "primary node n2 is down", "e": "locked by a job"}


def test_no_verify_disks_submits_no_verify_job(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("a", "running")])
    cl.verify_results["g1"] = [{}, ["a"], {}]
    master.master_pass(cl, _paths(tmp_path), master.MasterOptions(verify_disks=False),
                       clock=FakeClock())
    assert cl.verify_jobs == {} and cl.submitted == []


def test_failed_verify_job_is_kept_and_activates_nothing(tmp_path: Path, caplog) -> None:
    cl = WatcherLuxi([_inst("a", "running")])
    cl.verify_results["g1"] = [{}, ["a"], {}]
    cl.verify_status = constants.JOB_STATUS_ERROR
    master.master_pass(cl, _paths(tmp_path), master.MasterOptions(), clock=FakeClock())
    assert cl.submitted == [] and cl.archived_jobs == []
    assert "Verify-disks job 900 of group default ended with status error" in caplog.text


def test_verify_job_that_does_not_finish_in_time_is_not_waited_for(tmp_path: Path,
                                                                   caplog) -> None:
    cl = WatcherLuxi([_inst("a", "running")])
    cl.verify_status = constants.JOB_STATUS_RUNNING
    clock = FakeClock(100.0)
    calls = []

    def wait(job_id: int, fields: list[str], prev: Any, serial: Any, timeout: float) -> Any:
        calls.append(timeout)
        clock.advance(timeout)          # the master waited that long
        return "nochange"

    cl.answer_with(WaitForJobChange=wait)
    (group,) = master.collect(cl)[0]
    report = master.GroupReport(uuid=group, name="default", plan=master.core.Plan())
    master.verify_disks(cl, [report], master.MasterOptions(verify_timeout=25.0),
                        clock=clock, monotonic=clock)
    assert calls == [10.0, 10.0, 5.0] and report.verify_result is None
    assert "did not finish in time" in caplog.text


def test_restart_and_cleanup_jobs_expect_the_admin_state_the_pass_saw(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("a", "ERROR_down"), _inst("b", "USER_down", source="user")])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    master.master_pass(cl, paths, master.MasterOptions(job_age=60.0, verify_disks=False),
                       clock=FakeClock(5000.0))
    expected = {job[0]["instance_name"]: (job[0]["expected_admin_state"],
                                          job[0]["expected_admin_state_source"])
                for job in cl.submitted}
    assert expected == {"a": ("up", "admin"), "b": ("up", "user")}


def test_a_refused_job_is_logged_as_a_skip_not_a_failure(caplog: Any) -> None:
    refusal = ["OpPrereqError", [f"Instance a: {constants.ADMIN_STATE_CHANGED} since the job"
                                 " was submitted: ...; not starting it", "wrong_state"]]

    jobs = FakeLuxi({"QueryJobs": [[7, constants.JOB_STATUS_ERROR, [refusal]],
                                   [8, constants.JOB_STATUS_ERROR, [["OpExecError", ["boom"]]]]]})
    with caplog.at_level(logging.INFO):
        failed = master._wait_for_jobs(jobs, [7, 8], 10.0, names={7: "a", 8: "b"})
    assert failed == [8]
    assert "Skipping instance a (job 7)" in caplog.text
    assert "Watcher job 8 ended with status error" in caplog.text
    assert "Watcher job 7" not in caplog.text


def test_a_rebooted_node_gets_the_configuration_pushed_again(tmp_path: Path) -> None:
    cl = WatcherLuxi([_inst("c", "running")])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    master.master_pass(cl, paths, master.MasterOptions(), clock=FakeClock(1000.0))
    assert cl.submitted == []                       # the first pass only records boot ids
    cl.tables[constants.QR_NODE] = [("n1", "g1", False, "b2"), ("n2", "g1", False, None)]
    report = master.master_pass(cl, paths, master.MasterOptions(), clock=FakeClock(1300.0))
    ops = [job[0]["OP_ID"] for job in cl.submitted]
    assert ops == ["OP_CLUSTER_REDIST_CONF", "OP_INSTANCE_ACTIVATE_DISKS"]
    assert report.groups[0].jobs[master.REDIST_JOB] == 100
    master.master_pass(cl, paths, master.MasterOptions(), clock=FakeClock(1600.0))
    assert len(cl.submitted) == 2                   # the same boot id: nothing more
