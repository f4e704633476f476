"""A procedure's after-response callbacks run even when its reply cannot be delivered.

``node_leave_cluster`` removes the node's cluster files and asks the daemon
to stop once the answer is sent; if the master has gone away by then, the
node must still stop (its files are gone either way).
"""

from __future__ import annotations

import errno
import json
import socket
import threading

import pytest

from ganeti.rpc import transport
from ganeti.server import noded


@pytest.fixture
def server(tmp_path):
    from noded_harness import in_process_server
    with in_process_server(tmp_path) as srv:
        yield srv


def _run(server, monkeypatch, close_before_reply: bool) -> list[str]:
    """One ``version`` request whose procedure queues an after-response callback."""
    events: list[str] = []
    client_gone = threading.Event()

    def procedure(ctx):
        if close_before_reply:
            assert client_gone.wait(10)
        ctx.after_response.append(ctx.stop_daemon)
        return 42

    monkeypatch.setattr(noded.backend, "get_function", lambda name: procedure)
    server.stop_parent = lambda: events.append("stopped")
    ours, theirs = socket.socketpair()
    ctx = transport.make_client_context(server.cert_file)

    def client() -> None:
        try:
            with ctx.wrap_socket(theirs, server_hostname="node1.example.com") as tls:
                tls.sendall(b"POST /version HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: 2\r\n\r\n[]")
                if not close_before_reply:
                    events.append(tls.recv(65536).split(b"\r\n", 1)[0].decode())
        finally:
            client_gone.set()

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    ours.settimeout(10)
    try:
        server.finish_request(ours, ("127.0.0.1", 0))
    except OSError:
        pass   # the undeliverable reply; what matters is what ran
    finally:
        ours.close()
        thread.join(10)
    return events


def test_after_response_runs_after_the_reply(server, monkeypatch) -> None:
    # the client thread and the server race to record; both must have happened
    assert sorted(_run(server, monkeypatch, close_before_reply=False)) == \
        ["HTTP/1.1 200 OK", "stopped"]


def test_after_response_runs_when_the_client_went_away(server, monkeypatch) -> None:
    assert _run(server, monkeypatch, close_before_reply=True) == ["stopped"]
    assert server.request_ctx is None


def test_a_result_that_is_not_json_is_a_failed_call(server, monkeypatch) -> None:
    """The reply is encoded once; a payload it cannot encode becomes ``[False, why]``."""
    monkeypatch.setattr(noded.backend, "get_function", lambda name: lambda ctx: float("nan"))
    from noded_harness import answer_in_process
    reply = answer_in_process(server, b"POST /version HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 2\r\n\r\n[]")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    ok, message = json.loads(body)
    assert ok is False and "Cannot encode the reply" in message


def test_a_port_in_use_is_reported_as_such(server, tmp_path) -> None:
    """A failed bind surfaces as the socket error, not as a half-built server's."""
    from noded_harness import make_node_root
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.2", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        paths = make_node_root(tmp_path / "node2", server.cert_file)
        with pytest.raises(OSError) as info:
            noded.NodedServer("127.0.0.2", taken, noded.make_server_context(server.cert_file),
                              paths, "node2.example.com", spare_children=0)
        assert info.value.errno == errno.EADDRINUSE
