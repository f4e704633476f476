"""How ``make test`` spreads the suite over its pytest-xdist workers (README.md, "Tests").

Every test module is one unit of work, so that a module's fixtures (its
virtual cluster) are made once, on one worker; the guest-cluster tests
(``test/integration/test_guest_*.py``, and the guest tests of :data:`GUEST_USERS`),
which share their worker's guest
cluster, form two units: the ``drbd`` ones of ``test_guest_*.py``, and the others.  Each runs on
a worker of its own with a guest cluster of its own (made by the first
test that asks), so that the two longest units run side by side.  Units
are handed out in collection order (``--no-loadscope-reorder``), which
test/integration/conftest.py starts with the guest tests.

Hypothesis's per-example deadline is off for the whole suite: tests never
assert wall-clock time, and a loaded machine (a whole suite on two CPUs
beside qemu guests) made examples exceed the default 200 ms.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

#: the modules whose tests run on a guest cluster
GUEST_MODULE_PREFIX = "test/integration/test_guest_"
#: the unit of the guest tests of the drbd template (their names say drbd)
GUEST_DRBD_UNIT = "guest-cluster-drbd"
#: the unit of the other guest tests
GUEST_UNIT = "guest-cluster"
#: modules of other topics with a test on the guest cluster: such a test (its name says
#: drbd) joins the *other* guest unit (the drbd unit is the longer one: make test's
#: wall time is about its length), the module's other tests stay a unit of their own
GUEST_USERS = ("test/integration/test_upstream_harep.py",)


def work_unit(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: its module, :data:`GUEST_DRBD_UNIT`
    or :data:`GUEST_UNIT`."""
    module = nodeid.split("::", 1)[0]
    if module in GUEST_USERS:
        return GUEST_UNIT if "drbd" in nodeid else module
    if not module.startswith(GUEST_MODULE_PREFIX):
        return module
    return GUEST_DRBD_UNIT if "drbd" in nodeid else GUEST_UNIT


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scope scheduling with :func:`work_unit` as the scope."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ModuleScheduling(config, log)
