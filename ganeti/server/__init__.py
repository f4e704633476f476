"""Daemon wiring: logging setup, the common daemon runner and daemon mains.

* :mod:`ganeti.server.logsetup`: one log file per daemon, reopen on SIGHUP,
  the RAPI access log
* :mod:`ganeti.server.daemon`: options, pid file, daemonizing, signals
  (:func:`ganeti.server.daemon.run_daemon`)

Nothing imports this package (layer 6 in the ``ganeti`` package docstring).
"""
