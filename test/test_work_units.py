"""How make test's workers split the suite (test/conftest.py)."""

from __future__ import annotations

from test.conftest import GUEST_DRBD_UNIT, GUEST_UNIT, work_unit


def test_a_module_is_a_unit_and_the_guest_tests_form_two():
    assert work_unit("test/integration/test_burnin.py::test_burnin_passes[serial-file]") \
        == "test/integration/test_burnin.py"
    assert work_unit("test/test_ssh.py::test_run_stdin") == "test/test_ssh.py"
    for nodeid in ("test/integration/test_guest_drbd.py::test_the_mirror_survives_the_loss",
                   "test/integration/test_guest_burnin.py::test_upstream_burnin_with_drbd_disks"):
        assert work_unit(nodeid) == GUEST_DRBD_UNIT
    assert work_unit("test/integration/test_upstream_harep.py::test_pending_repairs") \
        == "test/integration/test_upstream_harep.py"
    for nodeid in ("test/integration/test_guest_plain.py::test_move_keeps_the_data",
                   "test/integration/test_guest_burnin.py::test_upstream_burnin_with_plain_disks",
                   "test/integration/test_guest_cluster.py::test_cluster_verifies_clean",
                   # the drbd unit is the longer one: harep's guest test balances the other
                   "test/integration/test_upstream_harep.py::test_harep_fails_over_a_drbd_"):
        assert work_unit(nodeid) == GUEST_UNIT
