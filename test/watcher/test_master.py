"""ganeti.watcher.master: the master's pass against a fake LUXI client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes import FakeClock

from ganeti import constants
from ganeti.pathutils import Paths
from ganeti.watcher import master, state


def _cells(*values: Any) -> list[list[Any]]:
    return [[constants.RS_NORMAL, v] if v is not None else [constants.RS_NODATA, None]
            for v in values]


class FakeLuxi:
    """Answers the watcher's queries from tables; records submissions."""

    def __init__(self, instances: list[tuple[Any, ...]], locks: list[tuple[Any, ...]] = ()):
        self.tables = {
            constants.QR_GROUP: [("g1", "default")],
            constants.QR_NODE: [("n1", "g1", False, "b1"), ("n2", "g1", False, None)],
            constants.QR_INSTANCE: instances,
            constants.QR_LOCK: list(locks),
        }
        self.submitted: list[list[dict[str, Any]]] = []
        self.archived: list[list[Any]] = []

    def call(self, method: str, args: list[Any], *, timeout: float | None = None) -> Any:
        if method == "Query":
            return {"fields": [], "data": [_cells(*row) for row in self.tables[args[0]]]}
        if method == "SubmitManyJobs":
            self.submitted += args[0]
            return [[True, 100 + k] for k in range(len(args[0]))]
        if method == "AutoArchiveJobs":
            self.archived.append(args)
            return [3, 0]
        raise AssertionError(f"unexpected LUXI call {method}")


def _inst(name: str, status: str, pnode: str = "n1") -> tuple[Any, ...]:
    return (name, status, "up", pnode, "g1", [], "file")


def test_pass_submits_jobs_with_the_watcher_reason(tmp_path: Path) -> None:
    cl = FakeLuxi([_inst("a", "ERROR_down"), _inst("b", "USER_down"), _inst("c", "running"),
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
    cl = FakeLuxi([_inst("a", "ERROR_down"), _inst("b", "ERROR_down"), _inst("c", "ERROR_down")],
                  locks=[("instance/a", ["job-7"], []),
                         ("instance/b", [], [["exclusive", ["job-8"]]]),
                         ("instance/c", [], [])])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    report = master.master_pass(cl, paths, master.MasterOptions(), clock=FakeClock())
    assert [job[0]["instance_name"] for job in cl.submitted] == ["c"]
    assert report.groups[0].plan.skipped == [("a", "locked by a job"), ("b", "locked by a job")]


def test_negative_job_age_still_archives_everything_finished(tmp_path: Path) -> None:
    cl = FakeLuxi([])
    paths = Paths(root=str(tmp_path))
    Path(paths.data_dir).mkdir(parents=True)
    master.master_pass(cl, paths, master.MasterOptions(job_age=-1), clock=FakeClock())
    assert cl.archived == [[-1, 30.0]]
