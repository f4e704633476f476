"""When a kvm stop presses the guest's ACPI power button (doc/kvm.md, "Lifecycle").

A guest still booting has no ACPI button driver yet and drops a press, as a
real machine's OS does, so a soft stop presses the button again while it
waits.  The presses start close together, so that a guest stopped right
after its start (its button appears a few seconds into the boot) is caught
soon after its driver is there, and back off to one every
:data:`POWERDOWN_REPEAT` seconds for a guest that takes its time.  Pure:
the hypervisor's wait loop asks :func:`repeat_after`.
"""

from __future__ import annotations

__all__ = ["POWERDOWN_REPEAT", "POWERDOWN_SCHEDULE", "repeat_after"]

#: seconds between two presses once the schedule below is used up
POWERDOWN_REPEAT = 3.0
#: seconds after the first, second, ... press before the next one
POWERDOWN_SCHEDULE: tuple[float, ...] = (0.5, 1.0, 1.0, 1.5, 2.0)


def repeat_after(presses: int) -> float:
    """Seconds to wait, after the ``presses``-th press (1 for the first), before
    pressing the button again."""
    if presses < 1:
        raise ValueError(f"presses must be at least 1, not {presses}")
    if presses <= len(POWERDOWN_SCHEDULE):
        return POWERDOWN_SCHEDULE[presses - 1]
    return POWERDOWN_REPEAT

