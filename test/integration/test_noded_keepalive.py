"""noded's kept connections (doc/protocols/rpc.md, "Kept connections"), through real daemons.

Read-only procedures asked with ``Connection: keep-alive`` share one child;
every other procedure, and every request without the explicit header, still
gets a child of its own; idle kept children time out or give their slot
back when a connection waits for one.
"""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from ganeti import constants
from ganeti.http import framing
from ganeti.rpc import transport as rpc_transport
from noded_harness import NodedCluster

pytestmark = pytest.mark.timeout(180)


def _wait_for(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _request(procedure: str, body: bytes = b"[]", *, keep: bool) -> bytes:
    return framing.build_request("POST", f"/{procedure}", {"Host": "x"}, body,
                                 keep_alive=True, announce_keep_alive=keep)


def _read_reply(tls, parser: framing.ResponseParser) -> framing.Response | None:
    """The next reply on ``tls``; None when the node closed the connection first."""
    while (reply := parser.next_response()) is None:
        chunk = tls.recv(65536)
        if not chunk:
            return None
        parser.feed(chunk)
    return reply


@pytest.fixture
def cluster(tmp_path):
    with NodedCluster(tmp_path, 1, extra_args=("--spare-children", "0")) as c:
        assert _wait_for(lambda: not c.nodes[0].request_children())
        yield c


def _connect(cluster):
    node = cluster.nodes[0]
    ctx = rpc_transport.make_client_context(cluster.cert_file)
    raw = socket.create_connection((node.address, node.port), timeout=10)
    return ctx.wrap_socket(raw)


def test_read_only_calls_share_one_child(cluster) -> None:
    node = cluster.nodes[0]
    runner = cluster.runner(keepalive=True)
    assert runner.call_version(cluster.names)[node.name].payload == constants.PROTOCOL_VERSION
    children = node.request_children()
    assert len(children) == 1   # the child stays, waiting for the next request
    for _ in range(3):
        assert runner.call_version(cluster.names)[node.name].payload == \
            constants.PROTOCOL_VERSION
        res = runner.call_all_instances_info(
            cluster.names, hypervisor_list=[constants.HT_FAKE], all_hvparams={})
        assert res[node.name].payload == {}
    assert node.request_children() == children
    runner.transport.close()
    assert _wait_for(lambda: not node.request_children())
    assert node.zombies() == []


def test_a_changing_call_gets_a_child_of_its_own(cluster) -> None:
    node = cluster.nodes[0]
    runner = cluster.runner(keepalive=True)
    runner.call_version(cluster.names)
    kept = node.request_children()
    res = runner.call_test_delay(cluster.names, duration=0.0)[node.name]
    assert not res.failed, res.fail_msg
    # its child ran, answered and exited; the kept child is the only one left
    assert _wait_for(lambda: node.request_children() == kept)
    runner.transport.close()


def test_changing_request_on_a_kept_connection_is_refused(cluster) -> None:
    with _connect(cluster) as tls:
        parser = framing.ResponseParser()
        tls.sendall(_request("version", keep=True))
        first = _read_reply(tls, parser)
        assert first is not None and first.status == 200 and first.keep_alive
        assert "timeout=" in first.headers["keep-alive"]
        tls.sendall(_request("test_delay", b"[0]", keep=True))
        second = _read_reply(tls, parser)
        assert second is not None and second.status == 400 and not second.keep_alive
        assert "needs a connection of its own" in json.loads(second.body)[1]
        assert _read_reply(tls, framing.ResponseParser()) is None   # then closed


@pytest.mark.parametrize("keep", [False, True], ids=["implicit-http11", "explicit-but-changing"])
def test_one_request_per_connection_without_an_explicit_read_only_ask(cluster, keep) -> None:
    procedure, body = ("test_delay", b"[0]") if keep else ("version", b"[]")
    with _connect(cluster) as tls:
        parser = framing.ResponseParser()
        tls.sendall(_request(procedure, body, keep=keep))
        reply = _read_reply(tls, parser)
        assert reply is not None and reply.status == 200 and not reply.keep_alive
        assert _read_reply(tls, parser) is None   # closed after the reply


def test_idle_kept_connection_times_out_and_is_replaced(tmp_path) -> None:
    # 3 s, not 1: the kept child is counted after the reply came back, and on a
    # loaded machine (CI, guests under TCG) a second could pass in between and
    # the child be gone already
    with NodedCluster(tmp_path, 1, extra_args=("--spare-children", "0",
                                                "--keepalive-timeout", "3")) as c:
        node = c.nodes[0]
        assert _wait_for(lambda: not node.request_children())
        transport = c.transport(keepalive=True)
        transport.post(node.address, node.port, "version", b"[]", 10)
        assert len(node.request_children()) == 1
        assert _wait_for(lambda: not node.request_children())   # closed by the node
        # the transport still holds it (its own limit is longer): the dead
        # connection is noticed and replaced, the call succeeds
        transport._clock = lambda: 0.0   # (never expire on the client side)
        assert json.loads(transport.post(node.address, node.port, "version", b"[]", 10)) == \
            [True, constants.PROTOCOL_VERSION]
        transport.close()
        assert _wait_for(lambda: not node.request_children())
        assert node.zombies() == []


def test_waiting_connection_reclaims_an_idle_kept_slot(tmp_path) -> None:
    with NodedCluster(tmp_path, 1, extra_args=("--spare-children", "0",
                                                "--max-children", "1")) as c:
        node = c.nodes[0]
        assert _wait_for(lambda: not node.request_children())
        kept = c.transport(keepalive=True)
        kept.post(node.address, node.port, "version", b"[]", 10)
        assert len(node.request_children()) == 1   # holds the only slot, idle
        # another client's request waits for the slot: the kept child gives it back
        res = c.runner().call_test_delay(c.names, duration=0.0)[node.name]
        assert not res.failed, res.fail_msg
        assert _wait_for(lambda: not node.request_children())
        # the kept connection was closed by the node: the next call opens a new one
        assert json.loads(kept.post(node.address, node.port, "version", b"[]", 10)) == \
            [True, constants.PROTOCOL_VERSION]
        kept.close()


def _queue_write(name: str, content: str, epoch: int, *, keep: bool = True) -> bytes:
    body = json.dumps([[[f"/var/lib/ganeti/queue/{name}", content]]]).encode()
    return _request(f"jobqueue_update_many?epoch={epoch}&master=node-e{epoch}", body, keep=keep)


def test_queue_writes_share_one_child_and_are_fenced_per_request(cluster) -> None:
    node = cluster.nodes[0]
    queue = node.paths.queue_dir
    with _connect(cluster) as tls:
        parser = framing.ResponseParser()
        for idx in (1, 2):
            tls.sendall(_queue_write(f"job-{idx}", f"v{idx}", 5))
            reply = _read_reply(tls, parser)
            assert reply is not None and reply.status == 200 and reply.keep_alive
            assert json.loads(reply.body) == [True, None]
        kept = node.request_children()
        assert len(kept) == 1        # both writes in the one child, which waits for more
        # an older master's write on the same kept connection is refused, writes nothing
        tls.sendall(_queue_write("job-3", "old", 4))
        refused = _read_reply(tls, parser)
        assert refused is not None and refused.status == 200
        assert json.loads(refused.body)[1].startswith("Fenced:")
        # a procedure outside the sets still needs a connection of its own
        tls.sendall(_request("test_delay", b"[0]", keep=True))
        other = _read_reply(tls, parser)
        assert other is not None and other.status == 400
    for idx in (1, 2):
        with open(os.path.join(queue, f"job-{idx}"), encoding="utf-8") as fh:
            assert fh.read() == f"v{idx}"
    assert not os.path.exists(os.path.join(queue, "job-3"))
