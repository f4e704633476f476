"""Small one-topic helpers: see the submodules.

* :mod:`ganeti.utils.io`: atomic writes, bounded reads, directories
* :mod:`ganeti.utils.localfile`: a daemon's local files, never through a link
* :mod:`ganeti.utils.process`: running commands with a timeout
* :mod:`ganeti.utils.retry`: retry with backoff and an injectable clock
* :mod:`ganeti.utils.validation`: host/instance names, script names, tags
* :mod:`ganeti.utils.units`: "10G" <-> MiB
* :mod:`ganeti.utils.net`: this node's identity, name resolution, TCP ping
"""
