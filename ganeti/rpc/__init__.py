"""Node RPC: the master calls procedures on node daemons over HTTPS.

* :mod:`ganeti.rpc.defs`: the declarative table of procedures (layer 2).
* :mod:`ganeti.rpc.results`: ``RpcResult`` and ``RpcResults`` (``.one``).
* :mod:`ganeti.rpc.stubs`: the typed ``call_<procedure>`` methods, generated
  from the table by :mod:`ganeti.rpc.gen` (committed, checked for freshness).
* :mod:`ganeti.rpc.transport`: HTTPS POST with the cluster certificate.
* :mod:`ganeti.rpc.client`: ``RpcRunner`` (the stubs over a parallel
  fan-out), plus node resolvers.

This package's ``__init__`` imports nothing so that importing
``ganeti.rpc.defs`` stays cheap and layer-clean.
"""
