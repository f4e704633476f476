"""A cluster manager for virtual machines in the Ganeti 2.x tradition.

Layers (imports point downward only; ``test/test_layering.py`` checks it):

1. foundation: errors, constants, pathutils, serializer, utils
2. data: objects, parameters, opcodes, rpc.defs
3. mechanisms: locking, config (+ configcheck), ssconf, crypto, luxi, query, rpc.client,
   rpc.transport
4. logic: master side replication <- cmdlib <- mcpu <- jqueue; node side
   backend -> hypervisor, storage (plug-ins import layers 1-2 only)
5. front ends: cli, client, rapi, watcher, tools
6. wiring: server (daemon mains); nothing imports it
"""

__version__ = "0.1.0"
