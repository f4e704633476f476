"""``gnt-debug test-jobqueue``: check the job queue through the master, as Ganeti's does.

Three parts, each printing a line when it starts and failing with
:class:`errors.OpExecError` at the first surprise:

1. submission: an opcode priority outside low/normal/high is refused by
   ``SubmitJob`` and fails a whole ``SubmitManyJobs``;
2. dependencies: a relative dependency is refused by ``SubmitJob``; five
   delay jobs of one ``SubmitManyJobs`` with relative dependencies get
   absolute ones and run in their order;
3. ``OP_TEST_JQUEUE`` jobs (one success, two successes, one failure, a
   partial failure) with both notifications: at each one the job must be
   in the announced state (:class:`JobQueueTestReporter`), and the test
   messages, results and final statuses must be the expected ones
   (doc/commands.md).
"""

from __future__ import annotations

import socket
import time

from ganeti import cli, constants, errors
from ganeti.opcodes import wire
from ganeti.utils import unixsock

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["test_jobqueue", "JobQueueTestReporter", "invalid_priorities"]

#: seconds the reporter waits to connect to the master's notification socket
CONNECT_TIMEOUT = 30.0


def invalid_priorities() -> list[int]:
    """The priorities just outside each submittable one and the queue's range."""
    edges = set(constants.OP_PRIO_SUBMIT_VALID) | {constants.OP_PRIO_LOWEST,
                                                   constants.OP_PRIO_HIGHEST}
    return sorted({p + d for p in edges for d in (-1, 1)} - constants.OP_PRIO_SUBMIT_VALID)


def _delay(duration: float = 0, **kw: Any) -> dict[str, Any]:
    return wire.test_delay(duration, **kw)


def _expect_refusal(what: str, call: Any) -> None:
    try:
        call()
    except errors.GanetiError:
        return
    raise errors.OpExecError(f"{what} did not fail when it should")


def _test_submission(cl: Any) -> None:
    cli.to_stdout("Testing job submission")
    for prio in invalid_priorities():
        for before, after in ((0, 0), (3, 0), (0, 3), (4, 2)):
            ops = [_delay() for _ in range(before)] + [_delay(priority=prio)] + \
                [_delay() for _ in range(after)]
            _expect_refusal(f"Submitting an opcode with priority {prio}",
                            lambda: cl.SubmitJob(ops))
            _expect_refusal(f"Submitting many jobs with one of priority {prio}",
                            lambda: cl.SubmitManyJobs([[_delay(), _delay(dry_run=True)], ops]))
    cli.to_stdout("Job submission tests were successful")


def _test_dependencies(cl: Any) -> None:
    cli.to_stdout("Testing job dependencies")
    _expect_refusal("Submitting a single job with a relative dependency",
                    lambda: cl.SubmitJob([_delay(depends=[[-1, None]])]))
    jobs = [[_delay(duration=1)], [_delay(duration=1, depends=[[-1, []]])],
            [_delay(duration=1, depends=[[-2, [constants.JOB_STATUS_SUCCESS]]])],
            [_delay(duration=1, depends=[])],
            [_delay(duration=1, depends=[[-2, [constants.JOB_STATUS_SUCCESS]]])]]
    submitted = cl.SubmitManyJobs(jobs)
    if not all(ok for ok, _ in submitted):
        raise errors.OpExecError(f"Job submission failed: {submitted}")
    ids = [job_id for _, job_id in submitted]
    for job_id in ids:
        cli.poll_job(job_id, cl, feedback_fn=None)
    rows = cl.QueryJobs(ids, ["id", "opexec", "ops"])
    for idx, dep in ((1, 0), (2, 0), (4, 2)):
        depends = rows[idx][2][0].get("depends") or []
        if len(depends) != 1 or depends[0][0] != ids[dep]:
            raise errors.OpExecError(f"Job {idx}'s opcode does not depend on job {ids[dep]}:"
                                     f" {depends}")
    start = [cli.merge_time(row[1][0]) or 0.0 for row in rows]
    if not (start[0] <= start[1] and start[0] <= start[2] <= start[4]):
        raise errors.OpExecError(f"Jobs did not run in the right order: {rows}")
    cli.to_stdout("Job dependency tests were successful")


class JobQueueTestReporter:
    """The ``feedback_fn`` of one OP_TEST_JQUEUE job: answers its notifications
    (connect to the announced socket once the job's status is checked) and
    collects its ``TESTMSG=`` messages; other entries are printed."""

    def __init__(self, cl: Any, job_id: int) -> None:
        self.cl = cl
        self.job_id = job_id
        self.messages: list[str] = []
        self._current: list[str] | None = None

    def __call__(self, entry: list[Any]) -> None:
        _serial, _stamp, log_type, msg = entry
        if log_type == constants.ELOG_JQUEUE_TEST and isinstance(msg, list) and len(msg) == 3:
            self._notification(*msg)
        elif (log_type == constants.ELOG_MESSAGE and isinstance(msg, str)
              and msg.startswith(constants.JQT_MSGPREFIX)):
            if self._current is None:
                raise errors.OpExecError("Received a test message without a start message")
            text = msg[len(constants.JQT_MSGPREFIX):]
            self._current.append(text)
            self.messages.append(text)
        else:
            cli.to_stdout(cli.format_log_message(log_type, msg))

    def _notification(self, path: str, test: str, arg: Any) -> None:
        if test not in constants.JQT_ALL:
            raise errors.OpExecError(f"Received an invalid test message {test!r}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            unixsock.connect(sock, path)
            (status,) = self.cl.QueryJobs([self.job_id], ["status"])[0]
            wanted = {constants.JQT_EXPANDNAMES: constants.JOB_STATUS_WAITING,
                      constants.JQT_EXEC: constants.JOB_STATUS_RUNNING,
                      constants.JQT_LOGMSG: constants.JOB_STATUS_RUNNING}.get(test)
            if wanted is not None and status != wanted:
                raise errors.OpExecError(f"Job status at '{test}' is '{status}', not"
                                         f" '{wanted}' as expected")
            if test == constants.JQT_STARTMSG:
                self._current = []
            elif test == constants.JQT_LOGMSG and len(self._current or []) != arg:
                raise errors.OpExecError(f"Received {len(self._current or [])} test messages"
                                         f" when {arg} are expected")


def _test_mode(cl: Any, title: str, fails: list[bool], expect_status: list[str]) -> None:
    cli.to_stdout(title)
    texts = [f"Testing {title}", "Hello World", "A", "", "B", "Foo|bar|baz",
             time.strftime("%Y-%m-%d_%H_%M_%S")]
    ops = [wire.test_jqueue(notify_waitlock=True, notify_exec=True, log_messages=texts,
                            fail=fail) for fail in fails]
    job_id = cl.SubmitJob(ops)
    reporter = JobQueueTestReporter(cl, job_id)
    failed = any(fails)
    results = None
    try:
        results = cli.poll_job(job_id, cl, feedback_fn=reporter)
    except errors.OpExecError as exc:
        if not failed:
            raise
        cli.to_stdout(f"Ignoring error for 'job fail' test: {exc}")
    else:
        if failed:
            raise errors.OpExecError("Job didn't fail when it should")
        if len(results) != len(ops):
            raise errors.OpExecError(f"Received {len(results)} results, expected {len(ops)}")
    sent = (fails.index(True) + 1) if failed else len(fails)
    if reporter.messages != texts * sent:
        raise errors.OpExecError(f"Received test messages don't match input (input"
                                 f" {texts * sent!r}, received {reporter.messages!r})")
    status, opstatus = cl.QueryJobs([job_id], ["status", "opstatus"])[0]
    final = constants.JOB_STATUS_ERROR if failed else constants.JOB_STATUS_SUCCESS
    if status != final or opstatus != expect_status:
        raise errors.OpExecError(f"Final status {status} {opstatus}, expected {final}"
                                 f" {expect_status}")


def test_jobqueue(opts: Any, args: list[str]) -> int:
    """Run the job queue tests against the master (exit 0 when all passed)."""
    cl = cli.get_client(opts)
    _test_submission(cl)
    _test_dependencies(cl)
    ok, err = constants.OP_STATUS_SUCCESS, constants.OP_STATUS_ERROR
    _test_mode(cl, "job success", [False], [ok])
    _test_mode(cl, "multiple successful opcodes", [False, False], [ok, ok])
    _test_mode(cl, "job failure", [True], [err])
    _test_mode(cl, "partial job failure", [False, False, True, False], [ok, ok, err, err])
    cli.to_stdout("Job queue test successful")
    return cli.EXIT_SUCCESS
