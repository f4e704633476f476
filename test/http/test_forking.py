"""ganeti.http.forking: the bounds object (the engine itself runs under the node daemon's
tests: test/server/test_noded_after_response.py and the noded integration tests)."""

from __future__ import annotations

import dataclasses
import os
import struct

import pytest

from ganeti.http import forking


@pytest.mark.parametrize(("children", "busy"), [(64, 16), (8, 2), (3, 1), (1, 1)],
                         ids=["default", "eight", "three", "one"])
def test_busy_answers_are_capped_at_a_quarter_of_the_slots(children, busy) -> None:
    assert forking.Limits(max_children=children).max_busy_children == busy


def test_limits_are_a_frozen_value() -> None:
    limits = forking.Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_children = 1   # type: ignore[misc]
    assert dataclasses.replace(limits, request_timeout=1.0).request_timeout == 1.0


def test_a_spare_that_reported_its_handshake_holds_its_slot_for_the_next_connection(
        tmp_path, monkeypatch) -> None:
    """A spare's report of its finished handshake may wait in the pipe when the
    parent takes the next established connection: that connection must wait
    for a slot, not get a third child beyond ``max_children`` (found by
    test/integration/test_noded.py::test_busy_daemon_answers_503 on a loaded
    machine)."""
    from noded_harness import make_cluster_cert

    from ganeti.http import tls

    limits = dataclasses.replace(forking.Limits(), max_children=2, busy_wait=30.0)
    srv = forking.ForkingServer("127.0.0.1", 0, tls.rapi_server_context(
        make_cluster_cert(tmp_path)), object, limits=limits, spare_children=0)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        srv._authenticated = (read_end, write_end)
        forked: list[bool] = []
        monkeypatch.setattr(srv, "collect_children", lambda: None)
        monkeypatch.setattr(srv, "_fork", lambda request, address, *, busy: forked.append(busy))
        monkeypatch.setattr(forking, "reclaim", lambda pids: set(pids))
        srv.active_children = {4001}          # a request child forked by the parent
        srv.handshaking_children = {4002}     # a spare whose handshake just ended...
        os.write(write_end, struct.pack("=i", 4002))   # ...and reported, unread yet
        srv.run_connection(object(), ("127.0.0.1", 1))   # type: ignore[arg-type]
        assert forked == []
        assert srv.active_children == {4001, 4002}
        assert len(srv.waiting) == 1
    finally:
        srv.waiting.clear()
        srv._authenticated = None
        os.close(read_end)
        os.close(write_end)
        srv.server_close()
