"""Shared test fakes: FakeRpc (node RPC with a results builder) and config helpers.

Import with ``test/`` on ``sys.path`` (``from fakes import FakeRpc, make_config``).
"""

from fakes.fakeconfig import make_cluster_context, make_config, run_opcode
from fakes.fakerpc import FakeRpc

__all__ = ["FakeRpc", "make_config", "make_cluster_context", "run_opcode"]
