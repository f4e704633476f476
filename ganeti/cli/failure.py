"""How a command ends: the exit codes of every ``gnt-*`` tool and Ganeti's error texts.

Exit codes (the same for every tool):

* ``0`` (:data:`EXIT_SUCCESS`): the command (and its job) succeeded;
* ``1`` (:data:`EXIT_FAILURE`): the command or its job failed, or the
  master could not be reached;
* ``2`` (:data:`EXIT_USAGE`): bad usage: unknown verb, bad option, wrong
  number of arguments;
* ``14`` (:data:`EXIT_UNKNOWN_FIELD`): a ``list`` or ``list-fields`` was
  asked for a field the resource does not have (Ganeti's code);
* ``130`` (:data:`EXIT_INTERRUPTED`): interrupted with Ctrl-C (a submitted
  job keeps running).

:func:`format_error` gives the text (and exit code) for an error, as
Ganeti's ``cli.FormatError`` words it; :mod:`ganeti.cli.main` prints it
for a verb's uncaught error and :mod:`ganeti.cli.jobs` for a failed job.
"""

from __future__ import annotations

from ganeti import constants, errors

__all__ = ["EXIT_SUCCESS", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_UNKNOWN_FIELD",
           "EXIT_INTERRUPTED", "format_error", "format_job_error", "master_hint"]

EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNKNOWN_FIELD = constants.EXIT_UNKNOWN_FIELD
EXIT_INTERRUPTED = 130


def master_hint() -> str:
    """On a node that is not the master, a line naming the master (from ssconf), else ""."""
    from ganeti import pathutils, ssconf
    from ganeti.utils import net
    try:
        master = ssconf.SimpleStore(pathutils.get_paths()).get_master_node()
    except (errors.GanetiError, OSError):
        return ""
    me = net.hostname()
    if not master or master == me:
        return ""
    return f"\nThis node ({me}) is not the master; the master is {master}: run the command there"


def format_error(err: BaseException) -> tuple[int, str]:
    """Ganeti's text for an error, with the exit code to use."""
    if isinstance(err, errors.OpPrereqError):
        return EXIT_FAILURE, ("Failure: prerequisites not met for this operation:\n"
                              f"error type: {err.ecode}, error details:\n{err}")
    if isinstance(err, errors.OpExecError):
        return EXIT_FAILURE, f"Failure: command execution error:\n{err}"
    if isinstance(err, errors.HooksAbort):
        return EXIT_FAILURE, f"Failure: hooks execution failed:\n{err}"
    if isinstance(err, errors.HooksFailure):
        return EXIT_FAILURE, f"Failure: hooks general failure: {err}"
    if isinstance(err, errors.ResolverError):
        return EXIT_FAILURE, f"Failure: can't resolve hostname {err}"
    if isinstance(err, errors.JobQueueDrainError):
        return EXIT_FAILURE, ("Failure: the job queue is marked for drain and doesn't accept"
                              " new requests")
    if isinstance(err, errors.JobQueueFull):
        return EXIT_FAILURE, ("Failure: the job queue is full and doesn't accept new job"
                              " submissions until old jobs are archived")
    if isinstance(err, errors.JobQueueQuorumError):
        return EXIT_FAILURE, ("Failure: the job was not stored on a majority of the master"
                              " candidates and was not accepted; submit it again (check the"
                              f" job named first):\n{err}")
    if isinstance(err, errors.JobLost):
        return EXIT_FAILURE, f"Error checking job status: {err}"
    if isinstance(err, errors.NoMasterError):
        return EXIT_FAILURE, str(err) + master_hint()
    if isinstance(err, errors.NotMasterError):
        return EXIT_FAILURE, f"Failure: not the master:\n{err}"
    if isinstance(err, errors.LuxiTimeoutError):
        return EXIT_FAILURE, ("Timeout while talking to the master daemon. Jobs might have been"
                              " submitted and will continue to run even if the call timed"
                              f" out. Useful commands in this situation are \"gnt-job list\","
                              f" \"gnt-job cancel\" and \"gnt-job watch\". Error:\n{err}")
    if isinstance(err, errors.QueryFilterParseError):
        return EXIT_FAILURE, f"Failure: invalid filter:\n{err}"
    if isinstance(err, errors.ParameterError):
        return EXIT_FAILURE, f"Failure: invalid parameter: {err}"
    if isinstance(err, errors.LuxiError):
        return EXIT_FAILURE, f"Error in the communication with the master daemon: {err}"
    if isinstance(err, errors.GanetiError):
        return EXIT_FAILURE, f"Unhandled Ganeti error: {err}"
    return EXIT_FAILURE, f"Unhandled exception: {type(err).__name__}: {err}"


def format_job_error(err: BaseException) -> str:
    """A one-paragraph text for a job's error (Ganeti's CLI wording)."""
    return format_error(err)[1]
