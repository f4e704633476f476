"""The run directories of kvm instances: files, the qemu process, the lock.

Every instance has a directory ``<kvm_run_dir>/<name>/`` (doc/kvm.md):

``runtime.json``  what was started (spec, disks, argv, acceleration, start time)
``pid``           qemu's pid file (``-pidfile``)
``qmp.sock``      the QMP socket, ``serial.sock`` the serial console,
``serial.log``    everything the guest wrote on its serial port
``.lock``         serializes QMP sessions and lifecycle changes

Nothing lives in memory: the node daemon forks per request and a restarted
daemon finds its instances again from these files and the live processes
(:meth:`RunDir.pid` checks that a pid still runs *this* instance's qemu).
:class:`RunDir` owns these files and the process behind them; what to
start and what to say over QMP is the plug-in's
(:mod:`ganeti.hypervisor.kvm.hypervisor`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

from ganeti import errors, serializer
from ganeti.hypervisor.kvm import firmware, qmp
from ganeti.utils import io as uio
from ganeti.utils import process

__all__ = ["RunDir", "runs_instance", "RUNTIME_FILE", "JOB_SAMPLES_FILE", "PIDFILE", "QMP_SOCKET",
           "SERIAL_SOCKET", "SERIAL_LOG", "QUIT_TIMEOUT", "process_exited"]

logger = logging.getLogger(__name__)

RUNTIME_FILE = "runtime.json"
#: the last block-job samples, for their rates (ganeti/hypervisor/kvm/vmjobs.py)
JOB_SAMPLES_FILE = "job-samples.json"
PIDFILE = "pid"
QMP_SOCKET = "qmp.sock"
SERIAL_SOCKET = "serial.sock"
SERIAL_LOG = "serial.log"
_LOCK = ".lock"
#: seconds a ``quit`` gets before SIGKILL, and SIGKILL before giving up
QUIT_TIMEOUT = 10.0


def runs_instance(pid: int, name: str) -> bool:
    """Whether process ``pid`` is alive (not a zombie) and a qemu running ``name``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            words = fh.read().split(b"\0")
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    if stat.rpartition(b")")[2].split()[:1] == [b"Z"]:
        return False
    try:
        idx = words.index(b"-name")
    except ValueError:
        return False
    return words[idx + 1:idx + 2] == [os.fsencode(name)]


class RunDir:
    """The instance directories under ``run_dir`` and the qemu processes they name.

    ``monotonic`` and ``sleep`` pace the waits for a process to go;
    ``qmp_timeout`` bounds every QMP exchange of :meth:`qmp`.
    """

    def __init__(self, run_dir: str, *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 qmp_timeout: float = 10.0) -> None:
        self.run_dir = run_dir
        self.monotonic = monotonic
        self.sleep = sleep
        self.qmp_timeout = qmp_timeout

    # --- files ---------------------------------------------------------------

    def instance_dir(self, name: str) -> str:
        """The directory of instance ``name`` (not created)."""
        if not name or "/" in name or name.startswith(".") or "\0" in name:
            raise errors.HypervisorError(f"Invalid instance name {name!r}")
        return os.path.join(self.run_dir, name)

    def path(self, name: str, entry: str) -> str:
        """The file ``entry`` (e.g. :data:`QMP_SOCKET`) of instance ``name``."""
        return os.path.join(self.instance_dir(name), entry)

    def list_instances(self) -> list[str]:
        """Every instance with a runtime record, alive or not."""
        try:
            entries = sorted(os.listdir(self.run_dir))
        except FileNotFoundError:
            return []
        return [e for e in entries if not e.startswith(".")
                and os.path.exists(os.path.join(self.run_dir, e, RUNTIME_FILE))]

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Serialize QMP sessions and lifecycle changes of one instance."""
        path = self.instance_dir(name)
        os.makedirs(path, mode=0o750, exist_ok=True)
        fd = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read_runtime(self, name: str) -> dict[str, Any] | None:
        """The persisted runtime record of ``name`` (None: not ours)."""
        path = self.path(name, RUNTIME_FILE)
        try:
            data = serializer.loads(uio.read_file(path))
        except FileNotFoundError:
            return None
        except (OSError, errors.SerializationError) as exc:
            raise errors.HypervisorError(f"Cannot read runtime of instance {name}: {exc}") from exc
        if not isinstance(data, dict):
            raise errors.HypervisorError(f"Corrupt runtime file of instance {name}")
        return data

    def write_runtime(self, name: str, runtime: dict[str, Any]) -> None:
        """Replace the runtime record of ``name`` (atomically)."""
        try:
            uio.write_file_atomic(self.path(name, RUNTIME_FILE),
                                  serializer.dumps(runtime), mode=0o640, fsync=False)
        except OSError as exc:
            raise errors.HypervisorError(f"Cannot save runtime of instance {name}: {exc}") from exc

    def read_job_samples(self, name: str) -> dict[str, Any] | None:
        """The kept block-job samples of ``name`` (None: none or unreadable)."""
        try:
            samples = serializer.loads(uio.read_file(self.path(name, JOB_SAMPLES_FILE)))
        except (OSError, errors.SerializationError):
            return None
        return samples if isinstance(samples, dict) else None

    def write_job_samples(self, name: str, samples: dict[str, Any] | None) -> None:
        """Keep ``samples`` for the next query (falsy: remove the file); errors are logged."""
        path = self.path(name, JOB_SAMPLES_FILE)
        try:
            if samples:
                uio.write_file_atomic(path, serializer.dumps(samples), mode=0o640, fsync=False)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.debug("Instance %s: cannot keep block job samples: %s", name, exc)

    def clean_files(self, name: str, runtime_too: bool = False) -> None:
        """Remove the pid file, sockets and serial log (and the runtime record); an
        swtpm of the instance still running is stopped (firmware.py)."""
        idir = self.instance_dir(name)
        firmware.stop_swtpm(idir)
        names = [PIDFILE, QMP_SOCKET, SERIAL_SOCKET, SERIAL_LOG, *firmware.RUN_FILES] + (
            [RUNTIME_FILE] if runtime_too else [])
        for entry in names:
            try:
                os.unlink(os.path.join(idir, entry))
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise errors.HypervisorError(f"Cannot clean up instance {name}: {exc}") from exc

    def remove_dir(self, name: str) -> None:
        """Remove the (cleaned) instance directory; a waiter re-creates it if needed."""
        idir = self.instance_dir(name)
        try:
            os.unlink(os.path.join(idir, _LOCK))
            os.rmdir(idir)
        except OSError as exc:
            logger.info("Leaving %s in place: %s", idir, exc)

    # --- the process ------------------------------------------------------------

    def pid(self, name: str) -> int | None:
        """The pid of ``name``'s qemu when that process is alive and ours."""
        try:
            pid = int(uio.read_file(self.path(name, PIDFILE)).strip())
        except (OSError, ValueError):
            return None
        return pid if runs_instance(pid, name) else None

    @contextlib.contextmanager
    def qmp(self, name: str) -> Iterator[qmp.QmpClient]:
        """A connected QMP client of ``name``'s qemu, closed afterwards."""
        client = qmp.QmpClient(self.path(name, QMP_SOCKET), timeout=self.qmp_timeout,
                               clock=self.monotonic)
        client.connect()
        try:
            yield client
        finally:
            client.close()

    def start(self, name: str, argv: list[str], runtime: dict[str, Any], *,
              timeout: float, before: Callable[[str], None] | None = None) -> None:
        """Run ``argv`` (a daemonizing qemu) in the instance directory.

        Leftover files of a previous qemu go first, then ``runtime`` is
        saved and ``before(instance dir)`` runs (the firmware links, swtpm);
        a qemu that fails to start leaves no files behind.  The caller holds
        :meth:`locked` and has checked that no qemu runs.
        """
        self.clean_files(name)
        self.write_runtime(name, runtime)
        try:
            if before is not None:
                before(self.instance_dir(name))
        except (errors.GanetiError, OSError) as exc:
            self.clean_files(name, runtime_too=True)
            if isinstance(exc, errors.HypervisorError):
                raise
            raise errors.HypervisorError(f"Cannot start instance {name}: {exc}") from exc
        try:
            result = process.run_command(argv, cwd=self.instance_dir(name), timeout=timeout)
        except errors.CommandError as exc:
            self.clean_files(name, runtime_too=True)
            raise errors.HypervisorError(f"Cannot start instance {name}: {exc}") from exc
        if result.failed:
            self.clean_files(name, runtime_too=True)
            detail = result.stderr.strip().splitlines()[-3:]
            raise errors.HypervisorError(
                f"Cannot start instance {name}: {result.fail_reason}: " + " / ".join(detail))

    def pin_vcpus(self, name: str, affinity: list[list[int] | None]) -> None:
        """Pin vCPU thread ``i`` to ``affinity[i % len]`` (None: leave it alone)."""
        if all(cpus is None for cpus in affinity):
            return
        with self.qmp(name) as client:
            cpus = client.execute("query-cpus-fast")
        for entry in cpus:
            mask = affinity[int(entry.get("cpu-index", 0)) % len(affinity)]
            if mask is None:
                continue
            try:
                os.sched_setaffinity(int(entry["thread-id"]), mask)
            except (OSError, KeyError, ValueError) as exc:
                raise errors.HypervisorError(
                    f"Instance {name}: cannot pin vCPU {entry.get('cpu-index')}"
                    f" to {mask}: {exc}") from exc

    def quit(self, name: str) -> None:
        """QMP ``quit``, then SIGKILL if qemu is not gone within :data:`QUIT_TIMEOUT`."""
        known = self.pid(name)
        try:
            with self.qmp(name) as client:
                client.execute("quit")
        except qmp.QmpError as exc:
            logger.info("QMP quit of %s failed (%s), killing it", name, exc)
        if not self.wait_gone(name, QUIT_TIMEOUT):
            self.kill(name, known)

    def wait_gone(self, name: str, timeout: float) -> bool:
        """Wait up to ``timeout`` s until ``name`` has no qemu; False if it still has."""
        # qemu removes its pid file on quit before it has exited: follow the process
        pid = self.pid(name)
        deadline = self.monotonic() + timeout
        while self.pid(name) is not None or (pid is not None and runs_instance(pid, name)):
            if self.monotonic() >= deadline:
                return False
            self.sleep(0.1)
        return True

    def kill(self, name: str, known_pid: int | None = None) -> None:
        """SIGKILL ``name``'s qemu (if any; ``known_pid`` when its pid file is gone) and
        wait until it has exited."""
        pid = self.pid(name)
        if pid is None and known_pid is not None and runs_instance(known_pid, name):
            pid = known_pid
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except OSError as exc:
            raise errors.HypervisorError(f"Cannot kill instance {name} (pid {pid}): {exc}") from exc
        if not self.wait_gone(name, QUIT_TIMEOUT):
            raise errors.HypervisorError(f"Instance {name} (pid {pid}) survived SIGKILL")
        self.wait_exited(pid, QUIT_TIMEOUT)

    def wait_exited(self, pid: int, timeout: float) -> None:
        """Wait until ``pid`` has exited (gone or a zombie), not only lost its memory.

        A dying process loses its command line before it closes its files,
        so its sockets (a migration port) and image locks outlive
        :meth:`pid` by a moment.  qemu has threads: its main thread can be a
        zombie while the others still hold the shared file table, so the
        process has exited only once it is a zombie with no other thread.
        """
        deadline = self.monotonic() + timeout
        while self.monotonic() < deadline:
            if process_exited(pid):
                return
            self.sleep(0.05)

    def drop(self, name: str) -> None:
        """Kill ``name``'s qemu (if any) and remove its files."""
        with self.locked(name):
            self.kill(name)
            self.clean_files(name, runtime_too=True)
            self.remove_dir(name)


def process_exited(pid: int) -> bool:
    """True when ``pid`` is gone, or a zombie whose every thread has exited.

    A thread-group leader shows state ``Z`` as soon as its own thread has
    exited, while its other threads may still be closing the files they
    share; ``/proc/PID/task`` lists those threads until they are gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[:1]
        if state not in ([b"Z"], [b"X"]):
            return False
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True
