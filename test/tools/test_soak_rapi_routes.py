"""The RAPI smuggling round of tools/soak knows every placeholder of every route (a new
resource with a new {name} crashed it with a KeyError, found only by ``make soak``)."""

from __future__ import annotations

import os
import re
import sys

from ganeti.rapi import resources

# the soak tool's modules import each other by name (it runs as a script)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "soak"))
import soak_rapi_abuse  # noqa: E402


def test_every_route_placeholder_is_filled() -> None:
    used = {name for route in resources.ROUTES for name in re.findall(r"\{(\w+)\}", route.path)}
    assert used <= soak_rapi_abuse.PLACEHOLDERS
