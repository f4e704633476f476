"""The watcher: the cron job that keeps a cluster running (doc/watcher.md).

* :mod:`ganeti.watcher.core`: the decisions, pure (instances to restart,
  clean up or give up on; attempt counters; rebooted nodes);
* :mod:`ganeti.watcher.state`: its files (state, instance status, lock);
* :mod:`ganeti.watcher.nodes`: what it does on every node (node daemon, hooks);
* :mod:`ganeti.watcher.master`: what it does on the master, over LUXI;
* :mod:`ganeti.watcher.main`: options and the order of one pass.

A front end: it speaks LUXI and never imports cmdlib, mcpu or backend.
"""

from __future__ import annotations

__all__: list[str] = []
