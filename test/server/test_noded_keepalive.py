"""noded_keepalive: which requests may share a kept connection, and the reclaim signal."""

from __future__ import annotations

import pytest

from ganeti.http import framing
from ganeti.rpc import defs
from ganeti.server import noded_keepalive as ka


def _head(procedure: str, connection: str | None = "keep-alive", method: str = "POST",
          version: str = "HTTP/1.1") -> framing.RequestHead:
    parser = framing.RequestParser()
    extra = f"Connection: {connection}\r\n" if connection is not None else ""
    parser.feed(f"{method} /{procedure} {version}\r\n{extra}\r\n".encode())
    head = parser.head()
    assert head is not None
    return head


@pytest.mark.parametrize(("connection", "wanted"), [
    ("keep-alive", True), ("Keep-Alive", True), ("foo, keep-alive", True),
    (None, False), ("close", False), ("upgrade", False),
], ids=["explicit", "any-case", "among-tokens", "implicit-http11", "close", "other"])
def test_only_an_explicit_keep_alive_asks(connection, wanted) -> None:
    assert ka.wants_keepalive(_head("version", connection)) is wanted


def test_keepalive_calls_are_read_only_rows() -> None:
    assert defs.KEEPALIVE_CALLS <= set(defs.CALLS)
    assert not defs.KEEPALIVE_CALLS & defs.FENCED_CALLS


def test_kept_queue_writes_are_fenced_rows() -> None:
    # the epoch check runs per request (noded dispatch), on a kept connection too
    assert defs.KEEPALIVE_WRITE_CALLS <= defs.FENCED_CALLS


def test_a_kept_queue_write_may_keep_its_connection() -> None:
    assert ka.may_keep(_head("jobqueue_update_many?epoch=2&master=n1"), 200, 3, timeout=15.0,
                       refusing=False)


@pytest.mark.parametrize(("procedure", "method", "shared"), [
    ("version", "POST", True), ("all_instances_info?epoch=3&master=n1", "POST", True),
    ("node_info", "POST", True), ("instance_start", "POST", False),
    ("upload_file", "POST", False), ("version", "GET", False),
    ("jobqueue_update_many?epoch=3&master=n1", "POST", True), ("jobqueue_rename", "POST", True),
    ("jobqueue_set_drain_flag", "POST", True), ("jobqueue_sync", "POST", False),
    ("replicate_state", "POST", False),
], ids=["version", "with-query", "node_info", "changing", "fenced", "not-post",
        "queue-update", "queue-rename", "queue-drain", "queue-copy", "config-push"])
def test_may_share(procedure, method, shared) -> None:
    assert ka.may_share(_head(procedure, method=method)) is shared


@pytest.mark.parametrize(("status", "served", "timeout", "refusing", "kept"), [
    (200, 0, 15.0, False, True), (200, ka.MAX_REQUESTS - 2, 15.0, False, True),
    (200, ka.MAX_REQUESTS - 1, 15.0, False, False), (400, 0, 15.0, False, False),
    (200, 0, 0.0, False, False), (200, 0, 15.0, True, False),
], ids=["first", "last-but-one", "request-cap", "error-reply", "disabled", "child-refuses"])
def test_may_keep(status, served, timeout, refusing, kept) -> None:
    assert ka.may_keep(_head("version"), status, served, timeout=timeout,
                       refusing=refusing) is kept


def test_may_keep_needs_the_ask_and_a_read_only_call() -> None:
    assert not ka.may_keep(_head("version", None), 200, 0, timeout=15.0, refusing=False)
    assert not ka.may_keep(_head("instance_start"), 200, 0, timeout=15.0, refusing=False)


def test_reclaim_while_idle_raises_else_marks() -> None:
    state = ka.Reclaim()
    state._handler(ka.RECLAIM_SIGNAL, None)   # busy: remembered for after the reply
    assert state.requested
    idle = ka.Reclaim()
    idle.idle = True
    with pytest.raises(ka.Reclaimed):
        idle._handler(ka.RECLAIM_SIGNAL, None)
    assert idle.requested and not idle.idle


def test_reply_headers_announce_the_limits() -> None:
    assert ka.reply_headers(15.0, 999) == {"Keep-Alive": "timeout=15, max=999"}
