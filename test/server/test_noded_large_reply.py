"""A large reply (a disk chunk) reaches a master that reads it slower than the request timeout.

The request timeout bounds each piece of the reply, not the whole of it
(ganeti.http.sending): in CI a master in a virtual node read a 5.6 MB
``blockdev_read_chunk`` reply for longer than 5 s and saw the connection
close in the middle of the body.
"""

from __future__ import annotations

import json

import pytest

from ganeti.server import noded

SIZE = 6 * 1024 * 1024


@pytest.fixture
def server(tmp_path):
    from noded_harness import in_process_server
    with in_process_server(tmp_path, request_timeout=0.5) as srv:
        yield srv


def test_a_slow_reader_gets_the_whole_reply(server, monkeypatch) -> None:
    from noded_harness import answer_in_process
    monkeypatch.setattr(noded.backend, "get_function", lambda name: lambda ctx: "z" * SIZE)
    # 6 MiB at 64 KiB per 10 ms take >= 1 s: twice the request timeout
    reply = answer_in_process(server, b"POST /version HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 2\r\n\r\n[]", pause=0.01)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(body) == [True, "z" * SIZE]
