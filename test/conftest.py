"""How ``make test`` spreads the suite over its pytest-xdist workers (README.md, "Tests").

Every test module is one unit of work, so that a module's fixtures (its
virtual cluster) are made once, on one worker; the guest-cluster modules
(``test/integration/test_guest_*.py``), which share the session's guest
cluster, are one unit together.  Units are handed out in collection order
(``--no-loadscope-reorder``), which test/integration/conftest.py starts
with the guest tests, the longest unit.
"""

from __future__ import annotations

from typing import Any

import pytest

#: the modules whose tests run on the session's guest cluster share one unit of work
GUEST_MODULE_PREFIX = "test/integration/test_guest_"
GUEST_UNIT = "guest-cluster"


def work_unit(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: its module, or :data:`GUEST_UNIT`."""
    module = nodeid.split("::", 1)[0]
    return GUEST_UNIT if module.startswith(GUEST_MODULE_PREFIX) else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scope scheduling with :func:`work_unit` as the scope."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ModuleScheduling(config, log)
