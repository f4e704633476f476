"""The cap on open consoles (ganeti/rapi/consoleslots.py): per instance and in all."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.rapi import consoleslots


def _refused(call, *args) -> str:
    with pytest.raises(errors.HttpError) as info:
        call(*args)
    assert info.value.status == 503
    return str(info.value)


def test_one_instance_gets_at_most_its_share():
    slots = consoleslots.ConsoleSlots(per_instance=2, total=10)
    slots.take("web1")
    slots.take("web1")
    assert "Too many open consoles of web1: 2 at most" in _refused(slots.take, "web1")
    assert "web1" in _refused(slots.check, "web1")
    slots.take("web2")
    assert slots.open_for("web1") == 2 and len(slots) == 3


def test_the_broker_holds_at_most_its_total():
    slots = consoleslots.ConsoleSlots(per_instance=5, total=2)
    slots.take("web1")
    slots.take("web2")
    assert "on this server: 2 at most" in _refused(slots.take, "web3")


def test_a_freed_slot_can_be_taken_again_and_frees_once():
    slots = consoleslots.ConsoleSlots(per_instance=1, total=1)
    free = slots.take("web1")
    free()
    free()
    assert len(slots) == 0 and slots.open_for("web1") == 0
    other = slots.take("web1")
    free()                 # the first one's free does not release the second
    assert len(slots) == 1
    other()
    slots.check("web1")


def test_check_holds_nothing():
    slots = consoleslots.ConsoleSlots(per_instance=1, total=1)
    slots.check("web1")
    slots.check("web1")
    assert len(slots) == 0


def test_the_defaults():
    slots = consoleslots.ConsoleSlots()
    assert (slots.per_instance, slots.total) == (consoleslots.PER_INSTANCE,
                                                 consoleslots.TOTAL)
