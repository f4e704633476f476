"""Live and non-live migration of kvm instances: what is said to qemu (doc/kvm.md).

The master drives the steps of :mod:`ganeti.hypervisor.base` ("Migration");
the plug-in (``ganeti.hypervisor.kvm.hypervisor``) keeps the files and the
processes, and this module decides the QMP conversation, with no sockets:

* the **target** starts qemu with the source's device model,
  ``-S -incoming defer``; :func:`listen_incoming` then asks it to listen with
  ``migrate-incoming`` on ``tcp:<target address>:<port>``, trying the ports
  of :func:`candidate_ports` (``migration_port`` upward) until qemu binds
  one, so no other process can take the port in between;
* the **source** gets the commands of :func:`outgoing_commands`: migration
  events on, ``max-bandwidth``/``downtime-limit`` from the hvparams
  ``migration_bandwidth``/``migration_downtime``, ``stop`` first when the
  migration is not live (upstream's non-live mode: the guest is paused,
  its memory copied once), then ``migrate``; under TCG a live migration
  is copied paused too (:func:`copies_paused`);
* :func:`parse_status` turns ``query-migrate`` into the status dict the
  master polls (``get_migration_status``);
* on failure :func:`abort_outgoing` cancels a transfer still running and
  resumes the guest when it ran before; on success the target is resumed
  with ``cont`` (:func:`resume`).

Every function that talks to qemu takes ``execute``, a callable with the
signature of :meth:`ganeti.hypervisor.kvm.qmp.QmpClient.execute`, so tests
script qemu's answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ganeti import errors
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import cmdline, qmp

__all__ = [
    "PORT_RANGE", "DEFAULT_PORT", "IN_PROGRESS", "CAPABILITIES", "Execute",
    "incoming_uri", "candidate_ports", "outgoing_commands", "run_commands",
    "listen_incoming", "parse_status", "abort_outgoing", "resume", "source_stopped",
    "PAUSED_COPY_ACCELS", "copies_paused",
]

#: how many ports from ``migration_port`` upward a target tries
PORT_RANGE = 32
#: upstream's ``migration_port`` default
DEFAULT_PORT = 8102
#: query-migrate states of a migration that is still going (the master keeps polling)
IN_PROGRESS = frozenset(["setup", "active", "device", "wait-unplug", "pre-switchover",
                         "cancelling", "postcopy-active", "postcopy-paused",
                         "postcopy-recover"])
#: migrate-set-capabilities on both sides: MIGRATION events for observers
CAPABILITIES = [{"capability": "events", "state": True}]
#: QMP run states of a source whose guest is not running (after ``stop`` or
#: while or after the memory was sent)
_STOPPED = frozenset(["paused", "postmigrate", "finish-migrate"])

#: accelerations whose live migrations are copied with the guest paused: qemu's
#: TCG (7.2 measured) loses guest writes made during a live copy, so the target
#: resumed a Linux guest on stale kernel pages (doc/kvm.md, "Migration")
PAUSED_COPY_ACCELS = frozenset([cmdline.ACCEL_TCG])

Execute = Callable[..., Any]


def incoming_uri(address: str, port: int) -> str:
    """The ``tcp:`` URI of ``address``/``port`` (IPv6 addresses bracketed)."""
    if not address:
        raise errors.HypervisorError("Migration needs the target node's address")
    host = f"[{address}]" if ":" in address else address
    return f"tcp:{host}:{port}"


def candidate_ports(first: int, count: int = PORT_RANGE) -> list[int]:
    """The ports a target tries, ``first`` upward, at most ``count``, below 65536."""
    if not 0 < first < 65536:
        raise errors.HypervisorError(f"Invalid migration_port {first}")
    return list(range(first, min(first + count, 65536)))


def copies_paused(live: bool, accel: str) -> bool:
    """Whether the source's guest is paused for the memory copy.

    A non-live migration is; so is a live one of a qemu running with an
    acceleration of :data:`PAUSED_COPY_ACCELS` (``accel``: the runtime
    record's), where qemu does not track every page the guest writes
    while it runs.
    """
    return not live or accel in PAUSED_COPY_ACCELS


def outgoing_commands(hvparams: dict[str, Any], uri: str,
                      live: bool) -> list[tuple[str, dict[str, Any]]]:
    """The QMP commands that start sending an instance to ``uri``."""
    commands: list[tuple[str, dict[str, Any]]] = [
        ("migrate-set-capabilities", {"capabilities": CAPABILITIES}),
        ("migrate-set-parameters", cmdline.migration_parameters(hvparams)),
    ]
    if not live:
        commands.append(("stop", {}))
    commands.append(("migrate", {"uri": uri}))
    return commands


def run_commands(execute: Execute, commands: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Run ``commands`` in order; the first refusal raises."""
    for command, arguments in commands:
        execute(command, **arguments)


def listen_incoming(execute: Execute, address: str, ports: Sequence[int]) -> int:
    """Make a ``-incoming defer`` qemu listen on the first port it can bind.

    Returns the port.  A port in use is skipped; any other refusal raises,
    and so does a range with no free port (naming it).
    """
    execute("migrate-set-capabilities", capabilities=CAPABILITIES)
    for port in ports:
        try:
            execute("migrate-incoming", uri=incoming_uri(address, port))
        except qmp.QmpCommandError as exc:
            if "in use" in exc.desc.lower():
                continue
            raise
        return port
    span = f"{ports[0]}-{ports[-1]}" if ports else "(none)"
    raise errors.HypervisorError(
        f"No free migration port on {address}: ports {span} are all in use")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_status(reply: Any) -> dict[str, Any]:
    """A ``query-migrate`` reply as the status dict of ``get_migration_status``.

    ``{"status", "info", "ram": {"transferred", "remaining", "total"}
    (bytes), "mbps", "downtime_ms", "total_time_ms"}``, keys absent when
    qemu did not say.  qemu's ``none`` (no migration was started) becomes
    ``failed``; states of a running migration other than ``setup`` and
    ``active`` are passed through (the master keeps polling them).
    """
    if not isinstance(reply, dict):
        return {"status": base.MIGRATION_STATUS_FAILED,
                "info": f"Unexpected query-migrate reply {reply!r}"}
    state = str(reply.get("status") or "none")
    out: dict[str, Any] = {"status": state}
    if state == "none":
        out.update(status=base.MIGRATION_STATUS_FAILED, info="No migration was started")
    elif state == base.MIGRATION_STATUS_FAILED:
        out["info"] = str(reply.get("error-desc") or "qemu reported a failed migration")
    elif state == base.MIGRATION_STATUS_CANCELLED:
        out["info"] = "The migration was cancelled"
    else:
        out["info"] = state
    ram = reply.get("ram")
    if isinstance(ram, dict):
        figures = {key: _int(ram.get(key)) for key in ("transferred", "remaining", "total")}
        out["ram"] = {key: value for key, value in figures.items() if value is not None}
        if isinstance(ram.get("mbps"), (int, float)) and not isinstance(ram["mbps"], bool):
            out["mbps"] = float(ram["mbps"])
    for key, name in (("downtime", "downtime_ms"), ("total-time", "total_time_ms")):
        value = _int(reply.get(key))
        if value is not None:
            out[name] = value
    return out


def source_stopped(status: str) -> bool:
    """Whether a source in QMP run state ``status`` has its guest stopped."""
    return status in _STOPPED


def abort_outgoing(execute: Execute, resume_guest: bool,
                   sleep: Callable[[float], None], attempts: int = 100) -> str:
    """Cancel a transfer still running; resume the guest if ``resume_guest``.

    Waits (``attempts`` polls ``sleep(0.1)`` apart) for a cancelled
    transfer to end, and returns the QMP run state afterwards.  Used after
    a failed migration (and by ``--cleanup``): qemu resumes a live-migrated
    guest by itself when the transfer fails, but not a guest stopped for a
    non-live one, and not one whose memory was fully sent (``postmigrate``).
    """
    state = parse_status(execute("query-migrate"))["status"]
    if state in IN_PROGRESS:
        execute("migrate_cancel")
        for _ in range(attempts):
            if parse_status(execute("query-migrate"))["status"] not in IN_PROGRESS:
                break
            sleep(0.1)
        else:
            raise errors.HypervisorError("The migration did not stop after migrate_cancel")
    status = str(execute("query-status").get("status"))
    if resume_guest and source_stopped(status):
        execute("cont")
        status = str(execute("query-status").get("status"))
    return status


def resume(execute: Execute, run: bool, sleep: Callable[[float], None] = lambda s: None,
           attempts: int = 1) -> str:
    """Target: after the memory arrived, ``cont`` when the guest should run.

    The source reports ``completed`` once it sent the last bytes; the target
    may still be loading the device state, so it is asked up to ``attempts``
    times, ``sleep(0.2)`` apart, whether it left ``inmigrate``.  Returns the
    run state; raises when the memory has not (fully) arrived by then.
    """
    status = str(execute("query-status").get("status"))
    for _ in range(attempts - 1):
        if status != "inmigrate":
            break
        sleep(0.2)
        status = str(execute("query-status").get("status"))
    if status == "inmigrate":
        raise errors.HypervisorError("The incoming migration has not completed")
    if run and status in ("paused", "prelaunch"):
        execute("cont")
        status = str(execute("query-status").get("status"))
    return status
