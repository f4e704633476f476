"""Shared test fakes: FakeRpc (node RPC with a results builder), config helpers, FakeClock,
FlakyDisk (a file writer that fails on demand).

Import with ``test/`` on ``sys.path`` (``from fakes import FakeRpc, make_config``).
"""

from fakes.clock import FakeClock
from fakes.flakydisk import FlakyDisk
from fakes.fakeconfig import make_cluster_context, make_config, run_opcode
from fakes.fakerpc import FakeRpc

__all__ = ["FakeClock", "FakeRpc", "FlakyDisk", "make_config", "make_cluster_context", "run_opcode"]
