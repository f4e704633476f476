"""Running external commands with a timeout and captured output; a forked
child's tie to its parent (:func:`set_parent_death_signal`)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from dataclasses import dataclass

from ganeti import errors

__all__ = ["RunResult", "run_command", "set_parent_death_signal"]

#: prctl(2) option: the signal this process gets when its parent dies
_PR_SET_PDEATHSIG = 1


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies.

    For a freshly forked child (``prctl(PR_SET_PDEATHSIG)``, Linux).  The
    signal comes when the *thread* that forked it ends, so fork from a
    thread that lives as long as the parent (the main thread).  A parent
    that died before the call sends nothing: compare ``os.getppid()`` with
    the parent's pid afterwards.  False where ``prctl`` is not available.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signum), 0, 0, 0) == 0)


@dataclass(frozen=True)
class RunResult:
    """Outcome of :func:`run_command`."""

    argv: tuple[str, ...]
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code != 0

    @property
    def fail_reason(self) -> str:
        """A one-line explanation of the failure ('' on success)."""
        if self.timed_out:
            return f"{self.argv[0]}: timed out"
        if self.signal is not None:
            return f"{self.argv[0]}: killed by signal {self.signal}"
        if self.exit_code:
            return f"{self.argv[0]}: exited with status {self.exit_code}"
        return ""

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.stdout + self.stderr


def run_command(argv: list[str], *, env: dict[str, str] | None = None,
                cwd: str | None = None, timeout: float | None = None,
                input_data: bytes | str | None = None,
                reset_env: bool = False) -> RunResult:
    """Run ``argv`` (no shell), wait at most ``timeout`` seconds.

    On timeout the whole process group is killed and ``timed_out`` is set.
    Raises :class:`errors.CommandError` only when the program cannot be
    started at all (missing, not executable).
    """
    full_env = dict(env or {}) if reset_env else {**os.environ, **(env or {})}
    if isinstance(input_data, str):
        input_data = input_data.encode("utf-8")
    try:
        proc = subprocess.Popen(
            argv, env=full_env, cwd=cwd, start_new_session=True,
            stdin=subprocess.PIPE if input_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise errors.CommandError(f"Cannot run {argv[0]}: {exc}") from exc
    timed_out = False
    try:
        out, err = proc.communicate(input_data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
    code = proc.returncode
    sig = -code if code is not None and code < 0 else None
    return RunResult(tuple(argv), None if sig else code, sig,
                     out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                     timed_out)
