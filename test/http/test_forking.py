"""ganeti.http.forking: the bounds object (the engine itself runs under the node daemon's
tests: test/server/test_noded_after_response.py and the noded integration tests)."""

from __future__ import annotations

import dataclasses

import pytest

from ganeti.http import forking


@pytest.mark.parametrize(("children", "busy"), [(64, 16), (8, 2), (3, 1), (1, 1)],
                         ids=["default", "eight", "three", "one"])
def test_busy_answers_are_capped_at_a_quarter_of_the_slots(children, busy) -> None:
    assert forking.Limits(max_children=children).max_busy_children == busy


def test_limits_are_a_frozen_value() -> None:
    limits = forking.Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_children = 1   # type: ignore[misc]
    assert dataclasses.replace(limits, request_timeout=1.0).request_timeout == 1.0
