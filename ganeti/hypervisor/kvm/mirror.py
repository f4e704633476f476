"""Live migration with local disks: NBD exports on the target, block mirrors on the source.

A ``file`` disk exists on one node only, so migrating such an instance
copies the disks while the guest runs (doc/kvm.md, "Migration with
disks").  The order, driven by the master (``gnt-instance migrate
--with-disks``):

1. target: the incoming qemu runs (paused, ``-incoming``) on freshly
   created disk files of the source's sizes; :func:`start_exports` starts
   qemu's NBD server on the target's address (the first free port of
   :data:`PORTS`) and exports every disk writable;
2. source: :func:`start_mirrors` starts one ``drive-mirror`` job per disk
   to ``nbd://target:port/diskN`` (``sync=full``, ``mode=existing``, speed
   ``migration_bandwidth``); :func:`mirror_status` is polled until every
   job is ``ready`` (the copy caught up; new guest writes keep flowing);
3. the memory migrates as usual;
4. source, with the guest stopped by the completed memory migration:
   :func:`complete_mirrors` cancels each ready job, which in qemu ends a
   ready mirror with the target as a point-in-time copy of the source;
5. target: :func:`stop_exports` stops the NBD server, then the guest is
   resumed there.

On failure the source calls :func:`abort_mirrors` (a forced cancel) and
keeps the guest; the target's qemu and files are dropped by the master.

Jobs are started with ``auto-dismiss=false`` so that a job which failed
(the target vanished: ``Input/output error``) stays visible, with its
error, to the next QMP connection (each node RPC opens its own); the jobs
are dismissed when they are done with.

Everything that builds or reads QMP data is a pure function; the
functions that talk take a client with an ``execute(command, **args)``
method (:class:`ganeti.hypervisor.kvm.qmp.QmpClient`), so the tests feed
them a scripted one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ganeti import errors
from ganeti.hypervisor.kvm import qmp

__all__ = [
    "PORTS", "JOB_PREFIX", "EXPORT_PREFIX", "STATUS_ACTIVE", "STATUS_READY", "STATUS_FAILED",
    "STATUS_COMPLETED", "QmpExecutor",
    "disk_nodes", "disk_sizes", "nbd_server_args", "export_args", "nbd_uri", "job_id",
    "mirror_args", "check_exports", "parse_jobs", "status_disks", "summarize",
    "start_exports", "stop_exports", "start_mirrors", "mirror_status", "complete_mirrors",
    "abort_mirrors",
]

#: TCP ports the target's NBD server may listen on (the first free one is used).
PORTS = range(10809, 10909)
#: prefix of our block job ids (``ganeti-mirror-disk0``) and NBD export ids
JOB_PREFIX = "ganeti-mirror-"
EXPORT_PREFIX = "ganeti-export-"
#: how long a mirror may take to conclude after a cancel (seconds)
CONCLUDE_TIMEOUT = 120.0

STATUS_ACTIVE = "active"        # copying, not every disk caught up yet
STATUS_READY = "ready"          # every disk in sync (writes are mirrored)
STATUS_FAILED = "failed"        # a job failed or disappeared
STATUS_COMPLETED = "completed"  # every job concluded without error after a cancel


class QmpExecutor(Protocol):
    """What the talking functions need of a QMP connection."""

    def execute(self, command: str, **arguments: Any) -> Any: ...


# --- pure: building commands --------------------------------------------------------------

def _is_disk(device: str) -> bool:
    return device.startswith("disk") and device[4:].isdigit()


def _order(key: str) -> tuple[int, int, str]:
    """``disk0, disk1, ...`` first (by index), then hotplugged disks by name."""
    return (0, int(key[4:]), "") if _is_disk(key) else (1, 0, key)


def _disk_key(entry: Any) -> str:
    """The name a disk of a ``query-block`` entry is mirrored and exported under ("": none).

    Disks started with ``-drive ...,id=diskN`` (``cmdline``) have the block
    backend ``diskN``; hotplugged ones (``-blockdev``/``blockdev-add``,
    ``hotplug.py``) have no backend name, only their node name, which the
    target keeps.  Both names work as drive-mirror's ``device``.  The
    cdrom, empty and read-only drives are skipped.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("inserted"), dict):
        return ""
    device, inserted = str(entry.get("device") or ""), entry["inserted"]
    if _is_disk(device):
        return device
    if not device and inserted.get("node-name") and not inserted.get("ro"):
        return str(inserted["node-name"])
    return ""


def disk_nodes(query_block: Any) -> dict[str, str]:
    """``disk key -> node-name`` of the instance's disks in a ``query-block`` reply.

    NBD exports need the node name qemu gave each drive; see
    :func:`_disk_key` for which drives count and their names.
    """
    result: dict[str, str] = {}
    for entry in query_block if isinstance(query_block, list) else []:
        key = _disk_key(entry)
        if key and entry["inserted"].get("node-name"):
            result[key] = str(entry["inserted"]["node-name"])
    return dict(sorted(result.items(), key=lambda kv: _order(kv[0])))


def disk_sizes(query_block: Any) -> dict[str, int]:
    """``disk key -> virtual size in bytes`` of the disks in a ``query-block`` reply."""
    result: dict[str, int] = {}
    for entry in query_block if isinstance(query_block, list) else []:
        key = _disk_key(entry)
        image = (entry["inserted"].get("image") or {}) if key else {}
        if isinstance(image.get("virtual-size"), int):
            result[key] = int(image["virtual-size"])
    return result


def nbd_server_args(host: str, port: int) -> dict[str, Any]:
    """``nbd-server-start`` arguments: listen on ``host:port`` (TCP)."""
    return {"addr": {"type": "inet", "data": {"host": host, "port": str(port)}}}


def export_args(device: str, node_name: str) -> dict[str, Any]:
    """``block-export-add``: export the node of ``device`` writable under the name ``device``."""
    return {"type": "nbd", "id": EXPORT_PREFIX + device, "node-name": node_name,
            "name": device, "writable": True}


def nbd_uri(host: str, port: int, export: str) -> str:
    """``nbd://host:port/export`` (an IPv6 address in brackets)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"nbd://{host}:{port}/{export}"


def job_id(device: str) -> str:
    """Our block job id for the mirror of ``device``."""
    return JOB_PREFIX + device


def mirror_args(device: str, host: str, port: int, speed: int) -> dict[str, Any]:
    """``drive-mirror`` of ``device`` onto the target's export of the same name.

    ``mode=existing``: the target file exists (created by the storage
    layer at the same size), ``sync=full``: every block is copied;
    ``speed`` in bytes/s (0: unlimited); kept after it ends
    (``auto-dismiss=false``, see the module docstring).
    """
    if speed < 0:
        raise errors.ProgrammerError(f"negative mirror speed {speed}")
    return {"device": device, "job-id": job_id(device), "target": nbd_uri(host, port, device),
            "format": "raw", "sync": "full", "mode": "existing", "speed": int(speed),
            "auto-dismiss": False}


def check_exports(source_sizes: dict[str, int], target: dict[str, Any]) -> list[str]:
    """The devices to mirror, after checking the target exports the same disks and sizes.

    ``target`` is :func:`start_exports`' result.  Raises
    :class:`errors.HypervisorError` naming the first difference.
    """
    exports = target.get("exports")
    if not isinstance(exports, list):
        raise errors.HypervisorError(f"Invalid mirror target description {target!r}")
    theirs = {str(e.get("device")): e.get("size") for e in exports if isinstance(e, dict)}
    if sorted(theirs) != sorted(source_sizes):
        raise errors.HypervisorError(
            f"The target exports disks {sorted(theirs)}, the source has {sorted(source_sizes)}")
    for device, size in sorted(source_sizes.items()):
        if theirs[device] != size:
            raise errors.HypervisorError(
                f"Disk {device} has {size} bytes on the source but {theirs[device]} on the target")
    return sorted(source_sizes, key=_order)


# --- pure: reading job state -----------------------------------------------------------------

def parse_jobs(jobs: Any) -> list[dict[str, Any]]:
    """Our mirror jobs of a ``query-block-jobs`` reply, one dict each, by device.

    Each has the keys of the migration-status contract (``device``,
    ``cur``, ``end``, ``ready``, ``speed``; doc/kvm.md) plus qemu's
    ``status`` and its ``error`` text (absent when there is none).
    """
    out = []
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        jid = str(job.get("device", ""))
        if not jid.startswith(JOB_PREFIX):
            continue
        entry: dict[str, Any] = {"device": jid[len(JOB_PREFIX):],
                                 "cur": int(job.get("offset", 0) or 0),
                                 "end": int(job.get("len", 0) or 0),
                                 "ready": bool(job.get("ready", False)),
                                 "speed": int(job.get("speed", 0) or 0),
                                 "status": str(job.get("status", ""))}
        if job.get("error"):
            entry["error"] = str(job["error"])
        out.append(entry)
    return sorted(out, key=lambda e: _order(e["device"]))


def status_disks(jobs: Any) -> list[dict[str, Any]]:
    """Our mirror jobs as the migration status' ``disks`` list (doc/kvm.md).

    ``[{"device", "cur", "end", "ready", "speed"}, ...]`` from a
    ``query-block-jobs`` reply; empty when no disk is being mirrored.
    """
    keys = ("device", "cur", "end", "ready", "speed")
    return [{k: job[k] for k in keys} for job in parse_jobs(jobs)]


def summarize(disks: Sequence[dict[str, Any]], expected: Iterable[str]) -> tuple[str, str]:
    """``(status, info)`` of the mirrors of the ``expected`` devices.

    ``failed`` when a job has an error, concluded before it was ready or
    is missing; ``ready`` when every job is; else ``active``.
    """
    by_device = {d["device"]: d for d in disks}
    for device in expected:
        job = by_device.get(device)
        if job is None:
            return STATUS_FAILED, f"the mirror of {device} is gone"
        if job.get("error"):
            return STATUS_FAILED, f"the mirror of {device} failed: {job['error']}"
        if job["status"] == "concluded" and not job["ready"]:
            return STATUS_FAILED, f"the mirror of {device} ended at {job['cur']}/{job['end']}"
    if all(by_device[d]["ready"] for d in expected):
        return STATUS_READY, "every disk is in sync"
    done = sum(d["cur"] for d in disks)
    total = sum(d["end"] for d in disks)
    return STATUS_ACTIVE, f"{done}/{total} bytes mirrored"


# --- talking to qemu ---------------------------------------------------------------------------

def start_exports(client: QmpExecutor, host: str,
                  ports: Iterable[int] = PORTS) -> dict[str, Any]:
    """Target: start the NBD server on ``host`` (first free port) and export every disk.

    Returns ``{"host", "port", "exports": [{"device", "size"}, ...]}``
    for :func:`start_mirrors` on the source.  An NBD server left over from
    an earlier attempt is stopped first.  Raises
    :class:`errors.HypervisorError` when no port is free or an export fails
    (the server is stopped again).
    """
    blocks = client.execute("query-block")
    nodes, sizes = disk_nodes(blocks), disk_sizes(blocks)
    if not nodes:
        raise errors.HypervisorError("The incoming instance has no disks to export")
    _stop_server(client)
    port = None
    last = ""
    for candidate in ports:
        try:
            client.execute("nbd-server-start", **nbd_server_args(host, candidate))
        except qmp.QmpCommandError as exc:
            last = exc.desc
            continue
        port = candidate
        break
    if port is None:
        raise errors.HypervisorError(f"Cannot start an NBD server on {host}: {last}")
    try:
        for device, node in nodes.items():
            client.execute("block-export-add", **export_args(device, node))
    except qmp.QmpError:
        _stop_server(client)
        raise
    return {"host": host, "port": port,
            "exports": [{"device": d, "size": sizes.get(d)} for d in nodes]}


def _stop_server(client: QmpExecutor) -> bool:
    """Stop the NBD server (and with it every export); False when none ran."""
    try:
        client.execute("nbd-server-stop")
    except qmp.QmpCommandError:
        return False
    return True


def stop_exports(client: QmpExecutor) -> bool:
    """Target: stop the NBD server; True when one was running."""
    return _stop_server(client)


def start_mirrors(client: QmpExecutor, target: dict[str, Any], speed: int) -> list[str]:
    """Source: mirror every disk onto ``target`` (:func:`start_exports`' result).

    Leftover jobs of ours (an earlier attempt) are cancelled and dismissed
    first.  Returns the devices being mirrored; on a failure the jobs
    already started are cancelled and the error is raised.
    """
    host, port = str(target.get("host", "")), target.get("port")
    if not host or not isinstance(port, int):
        raise errors.HypervisorError(f"Invalid mirror target {target!r}")
    devices = check_exports(disk_sizes(client.execute("query-block")), target)
    abort_mirrors(client)
    started: list[str] = []
    try:
        for device in devices:
            client.execute("drive-mirror", **mirror_args(device, host, port, speed))
            started.append(device)
    except qmp.QmpError:
        abort_mirrors(client)
        raise
    return started


def mirror_status(client: QmpExecutor, expected: Iterable[str] | None = None) -> dict[str, Any]:
    """Source: ``{"status": active|ready|failed, "info", "disks": [...]}`` of our jobs.

    ``expected``: the mirrored devices (default: the instance's disks).
    """
    if expected is None:
        expected = list(disk_nodes(client.execute("query-block")))
    disks = parse_jobs(client.execute("query-block-jobs"))
    status, info = summarize(disks, list(expected))
    return {"status": status, "info": info, "disks": disks}


def _wait_concluded(client: QmpExecutor, devices: Sequence[str], timeout: float,
                    clock: Callable[[], float], sleep: Callable[[float], None]
                    ) -> list[dict[str, Any]]:
    deadline = clock() + timeout
    while True:
        jobs = {j["device"]: j for j in parse_jobs(client.execute("query-block-jobs"))}
        if all(jobs.get(d, {"status": "concluded"})["status"] == "concluded" for d in devices):
            return [jobs[d] for d in devices if d in jobs]
        if clock() > deadline:
            raise errors.HypervisorError(
                f"The disk mirrors did not end within {timeout:.0f}s")
        sleep(0.05)


def _dismiss(client: QmpExecutor, jobs: Iterable[dict[str, Any]]) -> None:
    for job in jobs:
        try:
            client.execute("job-dismiss", id=job_id(job["device"]))
        except qmp.QmpCommandError:
            pass


def complete_mirrors(client: QmpExecutor, *, timeout: float = CONCLUDE_TIMEOUT,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """Source, guest stopped: end every (ready) mirror so the target holds a consistent copy.

    A mirror that is not ready at this moment (a job qemu paused while it
    stopped the guest, or one still copying what was written last) gets
    up to ``timeout`` seconds to be: the guest writes nothing any more.
    A soft ``block-job-cancel`` of a ready mirror flushes what is still
    dirty and concludes without an error.  Returns the final job entries;
    raises :class:`errors.HypervisorError` when a job did not get ready,
    is missing, or concluded with an error (the jobs are dismissed either
    way).
    """
    devices = list(disk_nodes(client.execute("query-block")))
    deadline = clock() + timeout
    while True:
        disks = parse_jobs(client.execute("query-block-jobs"))
        status, info = summarize(disks, devices)
        if status != STATUS_ACTIVE or clock() > deadline:
            break
        sleep(0.05)
    if status != STATUS_READY:
        abort_mirrors(client, timeout=timeout, clock=clock, sleep=sleep)
        raise errors.HypervisorError(f"Cannot complete the disk mirrors: {info}")
    for device in devices:
        client.execute("block-job-cancel", device=job_id(device))
    final = _wait_concluded(client, devices, timeout, clock, sleep)
    _dismiss(client, final)
    bad = [j for j in final if j.get("error")]
    if bad or len(final) != len(devices):
        why = ", ".join(f"{j['device']}: {j['error']}" for j in bad) if bad \
            else "a mirror job disappeared"
        raise errors.HypervisorError(f"The disk mirrors did not complete: {why}")
    return final


def abort_mirrors(client: QmpExecutor, *, timeout: float = CONCLUDE_TIMEOUT,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> int:
    """Source: cancel (forced) and dismiss every mirror job of ours; the count of jobs.

    The source's disks are untouched by a cancelled mirror; the guest
    keeps running on them.
    """
    jobs = parse_jobs(client.execute("query-block-jobs"))
    for job in jobs:
        if job["status"] != "concluded":
            try:
                client.execute("block-job-cancel", device=job_id(job["device"]), force=True)
            except qmp.QmpCommandError:
                pass    # it concluded meanwhile
    final = _wait_concluded(client, [j["device"] for j in jobs], timeout, clock, sleep)
    _dismiss(client, final)
    return len(jobs)
