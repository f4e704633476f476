"""tools.vcluster: ports are picked and held in one step (reserve_port)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from tools.harness import vcluster

ADDRESSES = ["127.0.1.1", "127.0.1.2"]


class SameFirst(random.Random):
    """Offers ``port`` first, then random ports."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self._first: int | None = port

    def randint(self, a: int, b: int) -> int:
        if self._first is not None:
            port, self._first = self._first, None
            return port
        return super().randint(a, b)


def test_a_reserved_port_is_never_picked_again_while_held() -> None:
    with vcluster.reserve_port(ADDRESSES) as first:
        with vcluster.reserve_port(ADDRESSES, rng=SameFirst(first.port)) as second:
            assert second.port != first.port
    # released: the same port can be reserved again
    with vcluster.reserve_port(ADDRESSES, rng=SameFirst(first.port)) as again:
        assert again.port == first.port


def test_a_daemon_can_listen_on_a_reserved_port() -> None:
    with vcluster.reserve_port(ADDRESSES) as reservation:
        daemon = socket.socket()
        daemon.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as our daemons do
        try:
            daemon.bind((ADDRESSES[0], reservation.port))
            daemon.listen()
        finally:
            daemon.close()


def test_ports_lie_below_the_ephemeral_range(tmp_path: Path) -> None:
    ranges = tmp_path / "range"
    ranges.write_text("32768\t60999\n")
    assert vcluster.port_range(str(ranges)) == (vcluster.PORT_MIN, 32767)
    assert vcluster.port_range(str(tmp_path / "missing")) == (vcluster.PORT_MIN, 32767)
    low, high = vcluster.port_range()
    for _ in range(20):
        assert low <= vcluster.pick_free_port(ADDRESSES) <= high
