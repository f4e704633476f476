import os
import sys
import time
import pytest
from tools.harness import guestcluster
from test.integration.guest_cluster_harness import GuestClusterFixture
from test.integration.test_guest_drbd import *  # noqa

_orig_gnt = GuestClusterFixture.gnt
_orig_ssh = GuestClusterFixture.ssh


def _timed_gnt(self, *argv, **kw):
    t = time.monotonic()
    r = _orig_gnt(self, *argv, **kw)
    sys.stderr.write(f"TIMING {time.monotonic() - t:6.1f}s gnt {' '.join(argv)[:90]}\n")
    return r


def _timed_ssh(self, node, command, **kw):
    t = time.monotonic()
    r = _orig_ssh(self, node, command, **kw)
    sys.stderr.write(f"TIMING {time.monotonic() - t:6.1f}s ssh {node} {str(command)[:80]}\n")
    return r


GuestClusterFixture.gnt = _timed_gnt
GuestClusterFixture.ssh = _timed_ssh


@pytest.fixture
def guest_cluster():
    fx = GuestClusterFixture(os.environ["GC_DIR"])
    fx.gc = guestcluster.load(os.environ["GC_DIR"])
    return fx
