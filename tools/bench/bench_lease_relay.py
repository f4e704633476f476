#!/usr/bin/env python3
"""What the lease relay of node loss recovery adds on the wire (doc/ha.md, "The lease relay").

Per node cut off from the master alone, each 2-s round: one
``ha_lease_relay`` call (master to a candidate) and one ``ha_lease`` call
(candidate to the node), each a POST on its own TLS connection.  This
counts the bytes of both, in process, with the project's own TLS contexts
(``ganeti.http.tls``, the cluster certificate on both ends) over memory
BIOs, and the requests as ``ganeti.rpc.transport`` frames them:

* a full TLS handshake (the candidate's forked child never resumes a
  session) and a resumed one (the master's long-lived transport does);
* the two requests (one instance named in the lease, and ten) and their
  replies.

Run: ``.venv/bin/python tools/bench/bench_lease_relay.py`` (under a second).
"""

from __future__ import annotations

import os
import ssl
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import crypto, serializer  # noqa: E402
from ganeti.http import framing, tls  # noqa: E402
from ganeti.rpc import defs  # noqa: E402
from ganeti.rpc.transport import USER_AGENT  # noqa: E402


def _pump(a: ssl.SSLObject, a_out: ssl.MemoryBIO, b_in: ssl.MemoryBIO) -> int:
    data = a_out.read()
    b_in.write(data)
    return len(data)


def handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext,
              session: ssl.SSLSession | None = None) -> tuple[int, int, ssl.SSLObject]:
    """``(client to server bytes, server to client bytes, client)`` of one handshake."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=None, session=session)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    up = down = 0
    done_c = done_s = False
    for _ in range(20):
        if not done_c:
            try:
                client.do_handshake()
                done_c = True
            except ssl.SSLWantReadError:
                pass
        up += _pump(client, c_out, s_in)
        if not done_s:
            try:
                server.do_handshake()
                done_s = True
            except ssl.SSLWantReadError:
                pass
        down += _pump(server, s_out, c_in)
        if done_c and done_s:
            break
    # TLS 1.3 tickets arrive after the handshake: let the client read them
    server.write(b"x")
    down += _pump(server, s_out, c_in)
    client.read(1)
    return up, down, client


def request(procedure: str, args: list) -> int:
    body = serializer.dumps_bytes(args)
    target = "/" + procedure + defs.epoch_query(65537, "node1.example.com")
    headers = {"Host": "192.0.2.12:1811", "Content-Type": "application/json",
               "User-Agent": USER_AGENT}
    return len(framing.build_request("POST", target, headers, body))


def reply(payload: object) -> int:
    body = serializer.dumps_bytes([True, payload])
    return len(framing.build_response(200, {"Content-Type": "application/json"}, body))


def main() -> None:
    key, cert = crypto.generate_self_signed_cert()
    with tempfile.TemporaryDirectory() as tmp:
        pem = os.path.join(tmp, "server.pem")
        with open(pem, "wb") as fh:
            fh.write(key + cert)
        client_ctx = tls.node_client_context(pem)
        server_ctx = tls.node_server_context(pem)
        up, down, client = handshake(client_ctx, server_ctx)
        session = client.session
        r_up, r_down, resumed = handshake(client_ctx, server_ctx, session)
    print(f"TLS full handshake: {up} B up, {down} B down ({up + down} B)")
    print(f"TLS resumed handshake: {r_up} B up, {r_down} B down ({r_up + r_down} B);"
          f" resumed: {resumed.session_reused}")
    for count in (1, 10):
        insts = [{"name": f"web{k}.example.com", "hypervisor": "kvm"} for k in range(count)]
        relay = request("ha_lease_relay", ["node3.example.com", "192.0.2.13",
                                           "node1.example.com", 30.0, insts, 2.0])
        lease = request("ha_lease", [29.98, insts])
        answer = reply({"lease": 29.98, "fenced": None})
        hop1 = r_up + r_down + relay + answer          # master: resumed session
        hop2 = up + down + lease + answer              # candidate's child: full handshake
        print(f"{count:2d} instance(s): relay request {relay} B, lease request {lease} B,"
              f" reply {answer} B each; per round: master-candidate {hop1} B,"
              f" candidate-node {hop2} B, total {hop1 + hop2} B"
              f" ({(hop1 + hop2) / 2:.0f} B/s per cut-off node)")


if __name__ == "__main__":
    main()
