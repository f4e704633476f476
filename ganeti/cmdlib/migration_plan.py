"""The pure decisions of a migration: which node an interrupted one was going to
(:func:`cleanup_target`), who keeps the instance after it (:func:`cleanup_plan`,
:func:`local_disks_cleanup_plan`) and the one-line summary of a completed one
(:func:`migration_summary`).  No config, no RPC: the LUs of
:mod:`ganeti.cmdlib.instance_migration` act on these answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ganeti import errors

__all__ = ["migration_summary", "cleanup_target", "cleanup_plan", "local_disks_cleanup_plan",
           "CLEANUP_NOTHING", "CLEANUP_SOURCE", "CLEANUP_LEFTOVER", "CLEANUP_TARGET",
           "CLEANUP_CONFLICT"]


def migration_summary(status: dict[str, Any]) -> str:
    """The figures of a completed migration status as one line ("" if none).

    E.g. ``250.3 MiB in 3.12 s, downtime 4 ms`` from the ``ram``,
    ``total_time_ms`` and ``downtime_ms`` keys (doc/kvm.md, "Migration");
    a live migration copied paused (``paused_copy``, TCG) says so instead
    of the downtime.
    """
    parts = []
    ram = status.get("ram")
    sent = ram.get("transferred") if isinstance(ram, dict) else None
    total = status.get("total_time_ms")
    if isinstance(sent, int):
        parts.append(f"{sent / (1024 * 1024):.1f} MiB"
                     + (f" in {total / 1000:.2f} s" if isinstance(total, int) else ""))
    elif isinstance(total, int):
        parts.append(f"in {total / 1000:.2f} s")
    if status.get("paused_copy"):
        # qemu's downtime counts only its last phase: the guest was paused throughout
        parts.append("the guest was paused for the whole copy (TCG: no live copy,"
                     " doc/kvm.md)")
    elif isinstance(status.get("downtime_ms"), int):
        parts.append(f"downtime {status['downtime_ms']} ms")
    return ", ".join(parts)


#: cleanup_plan answers: nothing to do; the source (config primary) keeps the
#: instance (resumed); neither side runs it, only the target's leftover goes;
#: the target has it; both run it (an operator must decide)
CLEANUP_NOTHING = "nothing"
CLEANUP_SOURCE = "source"
CLEANUP_LEFTOVER = "leftover"
CLEANUP_TARGET = "target"
CLEANUP_CONFLICT = "conflict"


def cleanup_target(instance: str, states: Mapping[str, str | None],
                   unanswered: Sequence[str], local_disks: bool) -> str | None:
    """The node an interrupted migration of ``instance`` was going to, for a
    ``migrate --cleanup`` given no target node (pure; doc/kvm.md, "Migration").

    ``states``: the ``hv_state`` of the instance on each node other than its
    primary that answered (None: not there); ``unanswered``: the nodes asked
    that did not answer.  The one node with any trace of the instance (an
    incoming, paused, running or crashed guest) is the target.  None means no
    other node has it and every node answered: only the primary is cleaned
    up.  Refused (:class:`errors.OpPrereqError`, nothing changed) when
    several nodes have it, when none has it but some did not answer (the
    guest may run there: resuming the source would run it twice), and when
    none has it and the disks are local (``local_disks``: the files a
    ``--with-disks`` copy left behind are found only on the node it was
    going to).
    """
    found = sorted(node for node, state in states.items() if state is not None)
    if len(found) > 1:
        where = ", ".join(f"{node} ({states[node]})" for node in found)
        raise errors.OpPrereqError(
            f"Instance {instance} is on several nodes besides its primary: {where}; give"
            " the node its migration was going to with -n (and stop the others by hand)",
            errors.ECODE_STATE)
    if found:
        return found[0]
    if unanswered:
        raise errors.OpPrereqError(
            f"No node that answered has instance {instance}, but {', '.join(unanswered)}"
            " did not answer and may run it; give the node the migration was going to"
            " with -n (or mark a dead node offline first)", errors.ECODE_ENVIRON)
    if local_disks:
        raise errors.OpPrereqError(
            f"No other node runs instance {instance}, whose disks are local: the disk copies"
            " of an interrupted migration --with-disks are found only on the node it was"
            " going to; give that node with -n", errors.ECODE_INVAL)
    return None


def local_disks_cleanup_plan(src_state: str | None, dst_state: str | None) -> str:
    """:func:`cleanup_plan` for an instance on local disks (``--with-disks``; pure).

    The target's disk copies are complete only once its guest was resumed
    (the mirrors end before that), so the target keeps the instance only
    when its guest runs; a paused target is a leftover, and the source
    keeps the instance (resumed when it has a guest).
    """
    plan = cleanup_plan(src_state, dst_state)
    if plan == CLEANUP_TARGET and dst_state != "running":
        return CLEANUP_SOURCE if src_state in ("paused", "migrating") else CLEANUP_LEFTOVER
    return plan


def cleanup_plan(src_state: str | None, dst_state: str | None) -> str:
    """Who keeps an instance after an interrupted migration (pure).

    ``src_state``/``dst_state``: the ``hv_state`` on the config's primary
    and on the other node (None: not there).  The target wins when its
    guest runs, or is paused with the source gone or fully sent
    (``migrating``: the memory arrived, only the final ``cont`` was
    missing).  Otherwise the source keeps it when it has a guest (resumed
    if paused or fully sent: the target never ran it); with neither, only
    a target leftover is removed.  States are strings here: the master
    does not import the hypervisors.
    """
    if src_state == "running" and dst_state == "running":
        return CLEANUP_CONFLICT
    if dst_state == "running" or (dst_state == "paused"
                                  and src_state in (None, "migrating", "crashed")):
        return CLEANUP_TARGET
    if src_state in ("running", "paused", "migrating"):
        if src_state == "running" and dst_state is None:
            return CLEANUP_NOTHING
        return CLEANUP_SOURCE
    return CLEANUP_LEFTOVER if dst_state is not None else CLEANUP_NOTHING
