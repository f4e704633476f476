"""Node RPC: the master calls procedures on node daemons over HTTPS.

* :mod:`ganeti.rpc.defs`: the declarative table of procedures (layer 2).
* :mod:`ganeti.rpc.transport`: HTTPS POST with the cluster certificate.
* :mod:`ganeti.rpc.client`: ``RpcRunner``, the parallel fan-out and the
  generated ``call_<procedure>`` methods, plus node resolvers.

This package's ``__init__`` imports nothing so that importing
``ganeti.rpc.defs`` stays cheap and layer-clean.
"""
