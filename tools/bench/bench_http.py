#!/usr/bin/env python3
"""HTTP framing benchmark: ganeti.http.framing (by hand) against h11, per node RPC exchange.

One exchange is what node RPC does per call, without sockets: the client
builds a POST, the server parses it (head and body), builds the JSON reply
and the client parses that.  Measured for a ``version`` call (2-byte
body) and for a 256 KiB body fed in 16 KiB pieces (TLS records), best of
5 rounds, for:

* ``framing``: :mod:`ganeti.http.framing`, what noded and the RPC
  transport use (by hand, with our limits and checks);
* ``h11``: bare h11 (no checks of our own; skipped when not installed);
* ``floor``: the least any parser must do (find the blank line, read
  Content-Length, slice).

The rule: framing by hand stays only if h11 would cost more; the project
chose by hand because h11 measured +0.1 ms in process and +0.7-0.9 ms of
node daemon CPU per request end to end (forked children touch its
objects; figures in ``doc/dependencies.md``).  The end-to-end cost per
request is ``tools/bench/bench_rpc.py``.

Prints figures, asserts nothing.  Run: ``.venv/bin/python tools/bench/bench_http.py``
(about 15 s; ``pip install h11`` for its column).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ganeti.http import framing  # noqa: E402

REQUEST_HEADERS = [("Host", "node1.example.com:1811"), ("Content-Type", "application/json"),
                   ("User-Agent", "Ganeti RPC client 3.0.0")]
RESPONSE_HEADERS = [("Server", "Ganeti 3.0.0"), ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"),
                    ("Content-Type", "application/json")]
SMALL = (b"[]", b"[true, 3000000]", 1 << 20)
LARGE = (b"[" + b"1, " * (256 * 1024 // 3) + b"1]", b"[true, null]", 16 * 1024)


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def exchange_framing(body: bytes, reply: bytes, piece: int) -> None:
    """One exchange with ganeti.http.framing."""
    request = framing.build_request("POST", "/version", REQUEST_HEADERS, body, keep_alive=False)
    server = framing.RequestParser()
    for chunk in _pieces(request, piece):
        server.feed(chunk)
    message = server.next_request()
    assert message is not None and len(message.body) == len(body)
    client = framing.ResponseParser()
    client.feed(framing.build_response(200, RESPONSE_HEADERS, reply, keep_alive=False))
    answer = client.next_response()
    assert answer is not None and answer.body == reply


def exchange_floor(body: bytes, reply: bytes, piece: int) -> None:
    """The same exchange parsed as little as possible by hand (no checks at all)."""
    def build(start: str, headers: list[tuple[str, str]], payload: bytes) -> bytes:
        lines = [start, *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(payload)}",
                 "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload

    def parse(data: bytes) -> bytes:
        end = data.find(b"\r\n\r\n")
        length = 0
        for line in data[:end].decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return data[end + 4:end + 4 + length]

    buf = bytearray()
    for chunk in _pieces(build("POST /version HTTP/1.1", REQUEST_HEADERS, body), piece):
        buf += chunk
    assert len(parse(bytes(buf))) == len(body)
    assert parse(build("HTTP/1.1 200 OK", RESPONSE_HEADERS, reply)) == reply


def exchange_h11(body: bytes, reply: bytes, piece: int) -> None:
    """The same exchange with h11 (both ends)."""
    import h11
    client = h11.Connection(h11.CLIENT)
    server = h11.Connection(h11.SERVER)
    headers = REQUEST_HEADERS + [("Content-Length", str(len(body))), ("Connection", "close")]
    request = (client.send(h11.Request(method="POST", target="/version", headers=headers))
               + client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
    got = bytearray()
    for chunk in _pieces(request, piece):
        server.receive_data(chunk)
        while True:
            event = server.next_event()
            if event is h11.NEED_DATA or isinstance(event, h11.EndOfMessage):
                break
            if isinstance(event, h11.Data):
                got += event.data
    assert len(got) == len(body)
    rheaders = RESPONSE_HEADERS + [("Content-Length", str(len(reply))), ("Connection", "close")]
    response = (server.send(h11.Response(status_code=200, headers=rheaders))
                + server.send(h11.Data(data=reply)) + server.send(h11.EndOfMessage()))
    client.receive_data(response)
    answer = bytearray()
    while not isinstance(event := client.next_event(), h11.EndOfMessage):
        if isinstance(event, h11.Data):
            answer += event.data
    assert bytes(answer) == reply


def best_us(fn: Callable[[], None], count: int, rounds: int = 5) -> float:
    """Best time of one call in microseconds, over ``rounds`` rounds of ``count`` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            fn()
        best = min(best, (time.perf_counter() - start) / count)
    return best * 1e6


def main() -> int:
    cases = [("version call (2-byte body)", SMALL, 20000),
             ("256 KiB body in 16 KiB pieces", LARGE, 300)]
    try:
        import h11
        have_h11 = f"h11 {h11.__version__}"
    except ImportError:
        have_h11 = ""
    print(f"microseconds per exchange (both ends), best of 5; {have_h11 or 'h11 not installed'}")
    for name, (body, reply, piece), count in cases:
        ours = best_us(lambda: exchange_framing(body, reply, piece), count)
        floor = best_us(lambda: exchange_floor(body, reply, piece), count)
        line = f"{name:32s} framing {ours:7.1f}   floor {floor:7.1f}"
        if have_h11:
            bare = best_us(lambda: exchange_h11(body, reply, piece), count)
            line += f"   h11 {bare:7.1f} ({bare - ours:+.1f} us against framing)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
