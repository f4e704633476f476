"""Every test in test/integration starts real daemons: mark it ``integration``.

``pytest -m "not integration"`` is then the fast run (no daemon starts);
tests elsewhere that start one carry the marker themselves.
"""

from __future__ import annotations

import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
#: a running guest cluster's directory (``tools/vcluster create DIR --guests``) for the
#: guest tests to use instead of making their own (doc/vcluster.md, "Guest clusters")
REUSE_ENV = "GANETI_TEST_GUEST_CLUSTER"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the items collected from this directory (the hook sees them all)
    ``integration`` and those on the guest cluster ``guests``; put the guest
    tests first (on ``make test``'s two workers their module group is the
    longest, so it starts at once: test/conftest.py) and the
    ``guest_cluster_last`` ones last among them: they destroy the cluster
    the other guest tests share.  The other integration tests come next and
    the unit tests last: make test's workers take modules in this order, and
    many short modules at the end even out when the workers finish (a long
    module started last would run on alone)."""
    for item in items:
        if HERE in pathlib.Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)
        if "guest_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.guests)
    items.sort(key=lambda item: (item.get_closest_marker("guests") is None,
                                 item.get_closest_marker("guest_cluster_last") is not None,
                                 item.get_closest_marker("integration") is None))


@pytest.fixture(scope="session")
def _guest_cluster_session(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The session's guest cluster object (made on first use, destroyed at the end)."""
    from test.integration.guest_cluster_harness import GuestClusterFixture, support_problem

    reuse = os.environ.get(REUSE_ENV)
    if reuse:           # a developer's running cluster: used as it is, and left running
        from tools.harness import guestcluster
        kept = GuestClusterFixture(reuse)
        kept.gc = guestcluster.load(os.path.abspath(reuse))
        yield kept
        return
    why = support_problem()
    if why:
        pytest.skip(f"no guest cluster: {why}")
    cluster = GuestClusterFixture(str(tmp_path_factory.mktemp("guests")), nodes=3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def guest_cluster(_guest_cluster_session):  # type: ignore[no-untyped-def]
    """The session's 3-node guest cluster, running (test/integration/guest_cluster_harness.py).

    Shared by every module that asks for it: one cluster per session, that
    is per ``make test`` worker (test/conftest.py; it is made again only if
    a test destroyed it).  Its guests have the default one virtual CPU each
    (doc/vcluster.md, "Guest clusters (`--guests`): nodes with a kernel of their own").
    """
    return _guest_cluster_session.ensure_running()
