"""Exports and imports: the pure parts both sides share (doc/exports.md).

* :mod:`ganeti.impexp.info`: an export's ``config.ini`` (read, write, check);
* :mod:`ganeti.impexp.stream`: the frames of a disk stream between two nodes.

The sides that use them stay with their layer: the node's transfers and
export directories in ``ganeti/backend/impexp.py``, the sending process in
``ganeti/server/impexp_worker.py``, the logical units in
``ganeti/cmdlib/backup.py``, ``ganeti/cmdlib/impexp.py`` and
``ganeti/cmdlib/instance_import.py``.
"""
