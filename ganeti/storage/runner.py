"""The one seam between block devices and the external commands they run.

A *command runner* is a function ``argv -> RunResult`` (see
:class:`ganeti.utils.process.RunResult`).  Device classes that drive
external tools (``lvcreate``, ``lvs``, ...) take one as a constructor
argument; the node uses :func:`system_runner`, tests a recording fake
(``test/fakes/cmdrunner.py``) that returns scripted output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ganeti import errors
from ganeti.utils import process

__all__ = ["CommandRunner", "system_runner", "run_checked", "failure", "COMMAND_TIMEOUT"]

#: the signature every runner has
CommandRunner = Callable[[Sequence[str]], process.RunResult]

#: seconds one storage command may take before it is killed
COMMAND_TIMEOUT = 120.0

#: the environment storage commands run with: C locale (parsable numbers), and
#: LVM without udev synchronisation (nodes without udev, doc/storage.md)
_ENV = {"LC_ALL": "C", "DM_DISABLE_UDEV": "1"}


def system_runner(argv: Sequence[str]) -> process.RunResult:
    """Run ``argv`` on this machine (no shell, C locale, :data:`COMMAND_TIMEOUT`).

    A program that cannot be started at all gives a result with exit code
    127 and the reason in ``stderr`` (as a shell would), so callers handle one
    kind of failure.
    """
    try:
        return process.run_command(list(argv), env=_ENV, timeout=COMMAND_TIMEOUT)
    except errors.CommandError as exc:
        return process.RunResult(tuple(argv), 127, None, "", str(exc))


def run_checked(runner: CommandRunner, argv: Sequence[str], what: str) -> str:
    """Run ``argv``; its stdout, or :class:`errors.StorageError` saying ``what`` failed.

    ``what`` names the operation and the disk ("Cannot create volume
    xenvg/abc.disk0"); the command's reason and its stderr follow it.
    """
    result = runner(argv)
    if result.failed:
        raise failure(result, what)
    return result.stdout


def failure(result: process.RunResult, what: str) -> errors.StorageError:
    """The error :func:`run_checked` raises for the failed ``result``: ``what``, the
    command's reason and its stderr."""
    detail = result.stderr.strip() or result.stdout.strip()
    return errors.StorageError(f"{what}: {result.fail_reason}" + (f": {detail}" if detail else ""))
