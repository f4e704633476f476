"""The one HTTP package (doc/protocols/rpc.md, "The HTTP package").

:mod:`~ganeti.http.framing` turns bytes into messages and back (no
sockets); :mod:`~ganeti.http.tls` builds every TLS context;
:mod:`~ganeti.http.client` is the HTTPS client; :mod:`~ganeti.http.forking`
(with :mod:`~ganeti.http.handshake` and :mod:`~ganeti.http.spare`) is the
forking server core the node daemon runs on.  Two console codecs sit
beside them: :mod:`~ganeti.http.websocket` (the browser's WebSocket) and
:mod:`~ganeti.http.rfb` (the VNC handshake the node does for a VNC server
with TLS).
"""
