"""A cluster manager for virtual machines in the Ganeti 2.x tradition.

Layers (imports point downward only; ``test/test_layering.py`` checks it,
with one row per module or package):

1. foundation: errors, constants, pathutils, serializer, utils, metrics
2. data: objects, parameters, opcodes, rpc.defs
3. mechanisms: locking, config (+ configcheck), mastermetrics, ssconf, watcherpause,
   crypto, ssh, luxi, query, http (framing), rpc.client, rpc.transport
4. logic: master side context, hooksmaster, replication <- failover <- cmdlib <- mcpu
   <- jqueue;
   node side hypervisor, storage <- osapi <- backend (plug-ins import layers 1-2
   only).  The two sides never import each other.
5. front ends: bootstrap, cli, client, tools, watcher; they never import cmdlib, mcpu
   or backend
6. wiring: server (daemon mains); nothing imports it

No module imports another that (directly or not) imports it back, not even
from inside a function.
"""

__version__ = "0.1.0"
