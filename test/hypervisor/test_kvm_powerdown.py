"""The ACPI power-button schedule of a kvm stop (ganeti.hypervisor.kvm.powerdown)."""

from __future__ import annotations

import itertools

import pytest

from ganeti.hypervisor.kvm import powerdown


def _press_times(timeout: float) -> list[float]:
    times = [0.0]
    for presses in itertools.count(1):
        nxt = times[-1] + powerdown.repeat_after(presses)
        if nxt >= timeout:
            return times
        times.append(nxt)
    raise AssertionError("unreachable")


def test_presses_start_close_together_and_back_off_to_the_repeat():
    assert _press_times(16.0) == pytest.approx([0.0, 0.5, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 15.0])


def test_the_delay_never_shrinks_and_ends_at_the_repeat():
    delays = [powerdown.repeat_after(n) for n in range(1, 20)]
    assert delays == sorted(delays)
    assert delays[0] == 0.5 and delays[-1] == powerdown.POWERDOWN_REPEAT == 3.0


def test_a_guest_whose_button_appears_after_4_s_waits_at_most_2_s_for_a_press():
    # a tinylinux guest stopped right after its start: its ACPI button driver is
    # there a few seconds into the boot; within the first 6 s the next press comes
    # at most 2 s later (with one press every 3 s from the start, up to 3 s)
    times = _press_times(60.0)
    for ready in (2.6, 4.1, 4.4, 5.0, 6.0):
        assert min(t for t in times if t >= ready) - ready <= 2.0


def test_presses_are_counted_from_one():
    with pytest.raises(ValueError):
        powerdown.repeat_after(0)
