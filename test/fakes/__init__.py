"""Shared test fakes: FakeRpc (node RPC with a results builder), FakeLuxi (a LUXI client
answering in-process, checked against the LUXI table), config helpers, FakeClock,
FlakyDisk (a file writer that fails on demand), GatedWriter (a config writer held
until the test lets it go on).

Import with ``test/`` on ``sys.path`` (``from fakes import FakeRpc, make_config``).
"""

from fakes.clock import FakeClock
from fakes.flakydisk import FlakyDisk, GatedWriter
from fakes.fakeconfig import make_cluster_context, make_config, run_opcode
from fakes.fakeluxi import FakeLuxi
from fakes.fakerpc import FakeRpc

__all__ = ["FakeClock", "FakeLuxi", "FakeRpc", "FlakyDisk", "GatedWriter", "make_config", "make_cluster_context", "run_opcode"]
