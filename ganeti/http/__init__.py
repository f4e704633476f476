"""HTTP for node RPC: :mod:`ganeti.http.framing` turns bytes into messages and back.

No sockets here: the daemons and the RPC transport own the I/O.
"""
