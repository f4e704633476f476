"""Taking the master role: the vote, the takeover and fencing of old masters.

* :mod:`ganeti.failover.vote`: the pure decision of the master vote;
* :mod:`ganeti.failover.lease`: the pure master lease and job id
  reservation state the master daemon keeps;
* :mod:`ganeti.failover.quorum`: asking the nodes (RPC), for the vote and
  for the lease;
* :mod:`ganeti.failover.takeover`: ``gnt-cluster master-failover``, step by
  step.

Design and invariants: doc/design/failover.md.  Master-side logic (layer 4):
it imports mechanisms (config, ssconf, rpc) and the replication package.
"""

from __future__ import annotations

__all__: list[str] = []
