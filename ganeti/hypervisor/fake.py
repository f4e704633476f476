"""The fake hypervisor: real, persistent state, no virtual machines.

A "running" instance is a JSON file ``<hypervisor_state_dir>/<name>.json``
holding its name, memory, vcpus, state, start time, hvparams, disk paths
and NICs.  The files survive node-daemon restarts (they live under the
node's run dir, like a real hypervisor's pid files), so everything the
master does (start, stop, reboot, migrate, list with live fields, memory
accounting) can be exercised end to end on a virtual cluster.

Node resources are simulated: total memory comes from ``node_memory`` or
``$GANETI_FAKE_HV_MEMORY`` (MiB, default 32 GiB); starting an instance that
does not fit is refused.  Mutations hold an ``flock`` on the state
directory so concurrent requests (the node daemon forks per request)
cannot overcommit memory.

Tests can make a guest "power itself off" (:meth:`FakeHypervisor.simulate_user_shutdown`)
or crash (:meth:`FakeHypervisor.simulate_crash`) to produce USER_down and
ERROR_down statuses.

Migration moves the instance's memory at the ``migration_bandwidth``
hvparam (MiB/s; 0, the default, completes at once): while it runs,
:meth:`FakeHypervisor.get_migration_status` reports the figures of the
hypervisor contract (``ram``, ``mbps``) and the instance info carries a
``migration`` runtime job (doc/progress.md, "Runtime jobs").  Tests make a
running migration fail with :meth:`FakeHypervisor.simulate_migration_failure`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ganeti import constants, errors, pathutils, progress, serializer
from ganeti.hypervisor import base
from ganeti.utils import io as uio

__all__ = ["FakeHypervisor", "ENV_FAKE_MEMORY", "DEFAULT_NODE_MEMORY", "DEFAULT_DOM0_MEMORY"]

logger = logging.getLogger(__name__)

ENV_FAKE_MEMORY = "GANETI_FAKE_HV_MEMORY"
DEFAULT_NODE_MEMORY = 32768
DEFAULT_DOM0_MEMORY = 1024
_SUFFIX = ".json"
#: the parsed state files kept between calls, in the state directory
#: (its dot keeps it out of the listing)
_CACHE_NAME = ".states-cache"
#: the same for the memory check of a start: ``[name, memory]`` per file, a
#: small document to parse (the whole states of 1,000 instances are ~1 MB)
_MEMORY_CACHE_NAME = ".memory-cache"
_CACHE_VERSION = 1
#: a state file changed this recently (ns) is not kept: a change within the
#: same file-system clock tick (a kernel tick, 10 ms at most on Linux) would
#: leave its identity unchanged; ten ticks of margin
_CACHE_SETTLE_NS = 100_000_000
#: settled state files read again (not in the cache) before the cache is
#: written anew, unless they are a quarter of the files or more: a burst of
#: starts does not rewrite a big cache at every call
_CACHE_REWRITE_READS = 8
_MiB = 1024 * 1024


def _memory_entry(state: dict[str, Any]) -> list[Any]:
    """What the memory cache keeps of a state: ``[name, memory]``."""
    return [state.get("name"), int(state.get("memory", 0) or 0)]


class FakeHypervisor(base.BaseHypervisor):
    """A hypervisor whose guests are JSON state files."""

    NAME = constants.HT_FAKE
    PARAMETERS = {
        "migration_mode": base.ParamSpec("Default migration mode (live or non-live)",
                                         base.check_migration_mode),
        "migration_bandwidth": base.ParamSpec(
            "Simulated migration speed (MiB/s, 0: instant)",
            lambda v: None if isinstance(v, int) and not isinstance(v, bool) and v >= 0
            else "must be a non-negative integer"),
    }

    def __init__(self, paths: pathutils.Paths, *, node_memory: int | None = None,
                 dom0_memory: int = DEFAULT_DOM0_MEMORY, cpu_total: int | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(paths)
        if node_memory is None:
            raw = os.environ.get(ENV_FAKE_MEMORY, "")
            try:
                node_memory = int(raw) if raw else DEFAULT_NODE_MEMORY
            except ValueError:
                logger.warning("Ignoring bad %s=%r", ENV_FAKE_MEMORY, raw)
                node_memory = DEFAULT_NODE_MEMORY
        self.node_memory = node_memory
        self.dom0_memory = dom0_memory
        self.cpu_total = cpu_total or os.cpu_count() or 1
        self.clock = clock
        self.state_dir = paths.hypervisor_state_dir

    # --- state files --------------------------------------------------------

    def _state_file(self, name: str) -> str:
        if not name or "/" in name or name.startswith(".") or "\0" in name:
            raise errors.HypervisorError(f"Invalid instance name {name!r}")
        return os.path.join(self.state_dir, name + _SUFFIX)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.state_dir, mode=0o750, exist_ok=True)
        fd = os.open(os.path.join(self.state_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            data = uio.read_file(self._state_file(name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise errors.HypervisorError(f"Cannot read state of instance {name}: {exc}") from exc
        try:
            state = serializer.loads(data)
        except errors.SerializationError as exc:
            raise errors.HypervisorError(f"Corrupt state file for instance {name}: {exc}") from exc
        if not isinstance(state, dict):
            raise errors.HypervisorError(f"Corrupt state file for instance {name}")
        return state

    def _must_read(self, name: str) -> dict[str, Any]:
        state = self._read(name)
        if state is None:
            raise errors.HypervisorError(f"Instance {name} is not running")
        return state

    def _write(self, state: dict[str, Any]) -> None:
        os.makedirs(self.state_dir, mode=0o750, exist_ok=True)
        try:
            uio.write_file_atomic(self._state_file(state["name"]),
                                  serializer.dumps(state), mode=0o640, fsync=False)
        except OSError as exc:
            raise errors.HypervisorError(
                f"Cannot write state of instance {state['name']}: {exc}") from exc

    def _remove(self, name: str) -> None:
        try:
            uio.remove_file(self._state_file(name))
        except OSError as exc:
            raise errors.HypervisorError(f"Cannot remove state of instance {name}: {exc}") from exc

    def _all_states(self) -> list[dict[str, Any]]:
        try:
            entries = sorted(os.listdir(self.state_dir))
        except FileNotFoundError:
            return []
        states = []
        for entry in entries:
            if entry.endswith(_SUFFIX) and not entry.startswith("."):
                state = self._read(entry[: -len(_SUFFIX)])
                if state is not None:
                    states.append(state)
        return states

    def _cached_states(self) -> list[dict[str, Any]]:
        """What :meth:`_all_states` answers, reusing the states parsed by an
        earlier call (``.states-cache``) for files whose identity (inode,
        size, modification time in ns) is unchanged: a listing and one
        ``lstat`` per file instead of reading and parsing every file (the
        node daemon answers ``all_instances_info`` in a fresh process).
        Files changed in the last :data:`_CACHE_SETTLE_NS` are read and not
        kept.  The cache is only a cache: unreadable, it is rebuilt.
        When it is written, the memory cache (:meth:`_cached_memory`) is
        written from the same files.
        """
        return self._scan(_CACHE_NAME, lambda state: state)

    def _cached_memory(self) -> list[list[Any]]:
        """``[name, memory]`` of every state file, through ``.memory-cache``
        as :meth:`_cached_states` does through its own: what the memory
        check of each start needs, without parsing every instance's whole
        state (which made a start cost O(N) in parsing, bench_instance_scaling.py)."""
        return self._scan(_MEMORY_CACHE_NAME, _memory_entry)

    def _scan(self, cache_name: str, extract: Callable[[dict[str, Any]], Any]) -> list[Any]:
        """``extract(state)`` of every state file, kept in ``cache_name`` between calls."""
        try:
            entries = sorted(os.listdir(self.state_dir))
        except FileNotFoundError:
            return []
        rebuild = False     # no usable cache: write one if there is any state
        try:
            cache = serializer.loads(uio.read_file(os.path.join(self.state_dir, cache_name)))
            kept = cache["files"] if cache.get("version") == _CACHE_VERSION else {}
            if not isinstance(kept, dict):
                kept, rebuild = {}, True
        except (OSError, errors.SerializationError, AttributeError, KeyError, TypeError):
            kept, rebuild = {}, True
        settled = time.time_ns() - _CACHE_SETTLE_NS
        values, keep, missed = [], {}, 0
        for entry in entries:
            if not entry.endswith(_SUFFIX) or entry.startswith("."):
                continue
            try:
                st = os.lstat(os.path.join(self.state_dir, entry))
            except FileNotFoundError:
                continue
            ident = [st.st_ino, st.st_size, st.st_mtime_ns]
            hit = kept.get(entry)
            if isinstance(hit, list) and len(hit) == 2 and hit[0] == ident:
                value = hit[1]
            else:
                state = self._read(entry[: -len(_SUFFIX)])
                if state is None:
                    continue
                value = extract(state)
                # a file too new to keep changes nothing in the cache
                missed += st.st_mtime_ns < settled
            values.append(value)
            if st.st_mtime_ns < settled:
                keep[entry] = [ident, value]
        # entries of files gone stay in the cache until the next write (unused)
        if missed >= min(_CACHE_REWRITE_READS, max(1, len(keep) // 4)) or (rebuild and values):
            self._write_cache(cache_name, keep)
            if cache_name == _CACHE_NAME:
                self._write_cache(_MEMORY_CACHE_NAME, {
                    entry: [ident, _memory_entry(value)] for entry, (ident, value) in keep.items()})
        return values

    def _write_cache(self, cache_name: str, files: dict[str, Any]) -> None:
        try:
            uio.write_file_atomic(os.path.join(self.state_dir, cache_name), serializer.dumps(
                {"version": _CACHE_VERSION, "files": files}), mode=0o640, fsync=False)
        except OSError as exc:   # a read-only state dir: just no cache
            logger.debug("Cannot write %s: %s", cache_name, exc)

    def _used_memory(self, exclude: str | None = None) -> int:
        # the cached states: reading and parsing every instance's file at each
        # start made starting N instances cost O(N^2) (bench_instance_scaling.py)
        return sum(int(memory) for name, memory in self._cached_memory() if name != exclude)

    def _free_memory(self, exclude: str | None = None) -> int:
        return self.node_memory - self.dom0_memory - self._used_memory(exclude)

    def _check_memory(self, name: str, memory: int, exclude: str | None = None) -> None:
        free = self._free_memory(exclude)
        if memory > free:
            raise errors.HypervisorError(
                f"Not enough memory to start instance {name}: needed {memory} MiB,"
                f" available {free} MiB")

    def _new_state(self, spec: base.InstanceSpec, block_devices: Sequence[str],
                   state: str) -> dict[str, Any]:
        return {
            "name": spec.name, "uuid": spec.uuid, "memory": spec.memory,
            "vcpus": spec.vcpus, "state": state, "start_time": self.clock(),
            "hvparams": dict(spec.hvparams), "beparams": dict(spec.beparams),
            "os": spec.os, "disks": list(block_devices),
            "nics": [serializer.to_data(n) for n in spec.nics],
            "migration": None,
        }

    # --- lifecycle ----------------------------------------------------------

    def start_instance(self, spec: base.InstanceSpec, block_devices: Sequence[str],
                       startup_paused: bool = False) -> None:
        """Create the state file; refuses duplicates, missing disks, overcommit.

        An instance left in the ``shutdown``/``crashed`` state (the guest
        stopped by itself) is replaced, as a real hypervisor would clean up.
        """
        for path in block_devices:
            if not os.path.exists(path):
                raise errors.HypervisorError(
                    f"Cannot start instance {spec.name}: disk {path} does not exist")
        with self._locked():
            old = self._read(spec.name)
            if old is not None and old.get("state") not in (base.HV_STATE_SHUTDOWN,
                                                            base.HV_STATE_CRASHED):
                raise errors.HypervisorError(
                    f"Instance {spec.name} is already running (state {old.get('state')})")
            self._check_memory(spec.name, spec.memory, exclude=spec.name)
            state = base.HV_STATE_PAUSED if startup_paused else base.HV_STATE_RUNNING
            self._write(self._new_state(spec, block_devices, state))
        logger.info("Started fake instance %s", spec.name)

    def stop_instance(self, name: str, force: bool = False,
                      timeout: float | None = None) -> None:
        """Remove the state file (soft and hard stop are both immediate)."""
        with self._locked():
            state = self._must_read(name)
            if state.get("state") == base.HV_STATE_INCOMING and not force:
                raise errors.HypervisorError(
                    f"Instance {name} is an incoming migration; use force to drop it")
            self._remove(name)
        logger.info("Stopped fake instance %s (force=%s)", name, force)

    def reboot_instance(self, name: str) -> None:
        """Restart the guest: state back to running, start time reset."""
        with self._locked():
            state = self._must_read(name)
            if state.get("state") not in (base.HV_STATE_RUNNING, base.HV_STATE_PAUSED):
                raise errors.HypervisorError(
                    f"Cannot reboot instance {name} in state {state.get('state')}")
            state["state"] = base.HV_STATE_RUNNING
            state["start_time"] = self.clock()
            state["reboots"] = int(state.get("reboots", 0)) + 1
            self._write(state)

    # --- information --------------------------------------------------------

    def list_instances(self) -> list[str]:
        """All instances with a state file, whatever their state: the names in
        the listing of the state directory (a shutdown asks for the list;
        reading, or even stat-ing and parsing the cache of, every file made
        stopping N instances cost O(N^2), bench_instance_scaling.py)."""
        try:
            entries = sorted(os.listdir(self.state_dir))
        except FileNotFoundError:
            return []
        return [entry[: -len(_SUFFIX)] for entry in entries
                if entry.endswith(_SUFFIX) and not entry.startswith(".")]

    def _info(self, state: dict[str, Any]) -> dict[str, Any]:
        info = {"name": state["name"], "memory": int(state.get("memory", 0)),
                "vcpus": int(state.get("vcpus", 1)), "state": state.get("state"),
                "time": max(0.0, self.clock() - float(state.get("start_time", 0)))}
        status = self._migration_status(state)
        if status is not None and status["status"] == base.MIGRATION_STATUS_ACTIVE:
            ram, bandwidth = status["ram"], int(state["migration"].get("bandwidth", 0))
            rate = bandwidth * _MiB
            info["jobs"] = [progress.runtime_job(
                progress.JOB_MIGRATION, ram["transferred"], ram["total"], bandwidth=bandwidth,
                rate=float(rate), eta=ram["remaining"] / rate if rate else None)]
        return info

    def get_instance_info(self, name: str) -> dict[str, Any] | None:
        state = self._read(name)
        return None if state is None else self._info(state)

    def get_all_instances_info(self) -> dict[str, dict[str, Any]]:
        return {s["name"]: self._info(s) for s in self._cached_states()}

    def get_instance_state(self, name: str) -> dict[str, Any] | None:
        """The whole stored record of ``name`` (disks, NICs, hvparams...)."""
        return self._read(name)

    def get_node_info(self) -> dict[str, Any]:
        return {
            "memory_total": self.node_memory,
            "memory_free": self._free_memory(),
            "memory_dom0": self.dom0_memory,
            "cpu_total": self.cpu_total,
            "cpu_nodes": 1,
            "cpu_sockets": 1,
            "cpu_dom0": 1,
            "hv_version": [0, 1],
        }

    def verify(self) -> str | None:
        """An error text if the state directory cannot be used."""
        try:
            os.makedirs(self.state_dir, mode=0o750, exist_ok=True)
        except OSError as exc:
            return f"Cannot create fake hypervisor state dir {self.state_dir}: {exc}"
        if not os.access(self.state_dir, os.W_OK | os.X_OK):
            return f"Fake hypervisor state dir {self.state_dir} is not writable"
        try:
            self._all_states()
        except errors.HypervisorError as exc:
            return str(exc)
        return None

    def get_console(self, spec: base.InstanceSpec, node_name: str) -> dict[str, Any]:
        return {"instance": spec.name, "kind": base.CONS_MESSAGE,
                "message": (f"Console not available for fake hypervisor (instance {spec.name}"
                            f" on node {node_name}, state file {self._state_file(spec.name)})"),
                "host": node_name, "port": None, "user": None, "command": None}

    # --- memory -------------------------------------------------------------

    def balloon_instance_memory(self, name: str, mem: int) -> None:
        """Set the memory of a running instance; growth must fit the node."""
        if mem <= 0:
            raise errors.HypervisorError(f"Invalid memory size {mem} for instance {name}")
        with self._locked():
            state = self._must_read(name)
            if mem > int(state.get("memory", 0)):
                self._check_memory(name, mem, exclude=name)
            state["memory"] = mem
            self._write(state)

    # --- the node -----------------------------------------------------------

    def powercycle_node(self, hvparams: dict[str, Any]) -> None:
        """Simulate a power cycle: every guest is gone, and the cycle is recorded.

        Appends ``{"time", "instances"}`` (the guests that were there) as one
        JSON line to :attr:`powercycle_log`; the node daemon restarts itself
        afterwards, as a real node's init would start it after the reboot.
        """
        with self._locked():
            names = [str(state["name"]) for state in self._all_states()]
            for name in names:
                self._remove(name)
            record = serializer.dumps_bytes({"time": self.clock(), "instances": names})
            try:
                with open(self.powercycle_log, "ab") as log:
                    log.write(record + b"\n")
            except OSError as exc:
                raise errors.HypervisorError(f"Cannot record the power cycle: {exc}") from exc
        logger.warning("Fake power cycle of this node: %d instance(s) gone", len(names))

    @property
    def powercycle_log(self) -> str:
        """The file recording every simulated power cycle, one JSON line each."""
        return os.path.join(self.state_dir, ".powercycles")

    def powercycles(self) -> list[dict[str, Any]]:
        """The recorded power cycles, oldest first."""
        try:
            with open(self.powercycle_log, "rb") as log:
                return [serializer.loads(line) for line in log if line.strip()]
        except FileNotFoundError:
            return []

    # --- user-visible guest events (for tests and demos) --------------------

    def simulate_user_shutdown(self, name: str) -> None:
        """The guest powered itself off: state ``shutdown`` (USER_down)."""
        self._set_state(name, base.HV_STATE_SHUTDOWN)

    def simulate_crash(self, name: str) -> None:
        """The guest crashed: state ``crashed`` (ERROR_down)."""
        self._set_state(name, base.HV_STATE_CRASHED)

    def _set_state(self, name: str, new: str) -> None:
        with self._locked():
            state = self._must_read(name)
            state["state"] = new
            self._write(state)

    # --- migration ----------------------------------------------------------

    def migration_info(self, name: str) -> dict[str, Any]:
        """The whole state record, to be carried to the target by RPC."""
        state = self._must_read(name)
        if state.get("state") not in (base.HV_STATE_RUNNING, base.HV_STATE_PAUSED):
            raise errors.HypervisorError(
                f"Cannot migrate instance {name} in state {state.get('state')}")
        return {"state": state}

    def accept_instance(self, spec: base.InstanceSpec, info: dict[str, Any], target: str,
                        block_devices: Sequence[str] = ()) -> None:
        """Create a paused ``incoming`` record from the source's data."""
        src = info.get("state") if isinstance(info, dict) else None
        if not isinstance(src, dict) or src.get("name") != spec.name:
            raise errors.HypervisorError(f"Invalid migration data for instance {spec.name}")
        with self._locked():
            if self._read(spec.name) is not None:
                raise errors.HypervisorError(
                    f"Instance {spec.name} already exists on the target node")
            self._check_memory(spec.name, spec.memory)
            new = dict(src)
            new.update(state=base.HV_STATE_INCOMING, memory=spec.memory, vcpus=spec.vcpus,
                       hvparams=dict(spec.hvparams), beparams=dict(spec.beparams),
                       migration={"role": "target", "address": target})
            self._write(new)

    def migrate_instance(self, name: str, target_node: str, target_address: str,
                         live: bool, target_info: dict[str, Any] | None = None,
                         hvparams: dict[str, Any] | None = None) -> None:
        """Mark the instance as sent; the fake transfer completes at once."""
        with self._locked():
            state = self._must_read(name)
            if state.get("state") not in (base.HV_STATE_RUNNING, base.HV_STATE_PAUSED):
                raise errors.HypervisorError(
                    f"Cannot migrate instance {name} in state {state.get('state')}")
            mem = int(state.get("memory", 0))
            bandwidth = state.get("hvparams", {}).get("migration_bandwidth", 0)
            state["migration"] = {
                "role": "source", "target_node": target_node,
                "target_address": target_address, "live": live,
                "previous_state": state["state"],
                "total_ram": mem, "started": self.clock(),
                "bandwidth": bandwidth if isinstance(bandwidth, int) and bandwidth > 0 else 0,
            }
            state["state"] = base.HV_STATE_MIGRATING
            self._write(state)

    def _migration_status(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """The source's migration figures at the clock's time, None if not migrating."""
        mig = state.get("migration") or {}
        if mig.get("role") != "source":
            return None
        total = int(mig.get("total_ram", 0)) * _MiB
        elapsed = max(0.0, self.clock() - float(mig.get("started", 0)))
        speed = int(mig.get("bandwidth", 0)) * _MiB
        done = total if not speed else min(total, int(elapsed * speed))
        if mig.get("failed"):
            status, done = base.MIGRATION_STATUS_FAILED, int(mig.get("failed_at", done))
        elif done >= total:
            status = base.MIGRATION_STATUS_COMPLETED
        else:
            status = base.MIGRATION_STATUS_ACTIVE
        result: dict[str, Any] = {
            "status": status, "ram": {"transferred": done, "remaining": total - done,
                                      "total": total},
            "mbps": round(done * 8 / elapsed / 1e6, 1) if elapsed > 0 else 0.0,
            "total_time_ms": int(elapsed * 1000),
            # the older keys, in MiB
            "transferred_ram": done // _MiB, "total_ram": total // _MiB}
        if mig.get("failed"):
            result["info"] = str(mig["failed"])
        return result

    def get_migration_status(self, name: str) -> dict[str, Any]:
        """Source: the hypervisor contract's status dict (``status``, ``ram``,
        ``mbps``, ``total_time_ms``; ``info`` when it failed)."""
        state = self._must_read(name)
        status = self._migration_status(state)
        if status is None:
            return {"status": base.MIGRATION_STATUS_FAILED,
                    "info": f"Instance {name} is not being migrated"}
        return status

    def simulate_migration_failure(self, name: str,
                                   reason: str = "simulated migration failure") -> None:
        """Make the running migration of ``name`` (on its source) fail now."""
        with self._locked():
            state = self._must_read(name)
            status = self._migration_status(state)
            if status is None:
                raise errors.HypervisorError(f"Instance {name} is not being migrated")
            state["migration"].update(failed=reason,
                                      failed_at=status["ram"]["transferred"])
            self._write(state)

    def finalize_migration_dst(self, spec: base.InstanceSpec, info: dict[str, Any],
                               success: bool) -> None:
        """Success: the incoming record starts running; failure: it is dropped."""
        with self._locked():
            state = self._must_read(spec.name)
            if state.get("state") != base.HV_STATE_INCOMING:
                raise errors.HypervisorError(
                    f"Instance {spec.name} is not an incoming migration here")
            if not success:
                self._remove(spec.name)
                return
            src = info.get("state") if isinstance(info, dict) else None
            prev = (src or {}).get("state", base.HV_STATE_RUNNING)
            state["state"] = prev if prev in (base.HV_STATE_RUNNING,
                                              base.HV_STATE_PAUSED) else base.HV_STATE_RUNNING
            state["migration"] = None
            self._write(state)

    def finalize_migration_src(self, name: str, success: bool, live: bool) -> None:
        """Success: forget the instance; failure: resume it as it was."""
        with self._locked():
            state = self._must_read(name)
            if success:
                self._remove(name)
                return
            mig = state.get("migration") or {}
            if state.get("state") == base.HV_STATE_MIGRATING:
                state["state"] = mig.get("previous_state", base.HV_STATE_RUNNING)
            state["migration"] = None
            self._write(state)
