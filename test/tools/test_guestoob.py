"""The guest cluster's out-of-band power protocol (tools/harness/guestoob.py): its pure
parts, and one server round trip on the loopback address with a fake executor."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from ganeti import constants, errors
from tools.harness import guestoob, guestoob_client

KEY = guestoob.auth_key("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")


def test_the_key_is_a_hash_of_the_key_file_not_the_file() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"
    assert guestoob.auth_key(text) == guestoob.auth_key(text.strip() + "\n\n")
    assert guestoob.auth_key(text) != guestoob.auth_key(text + "d")
    assert b"abc" not in guestoob.auth_key(text)


def test_an_authentic_request_is_accepted_for_its_nonce_only() -> None:
    line = guestoob.request_line(KEY, "n1", "power-off", "node3.vcluster")
    assert guestoob.check_request(KEY, "n1", line) == ("power-off", "node3.vcluster")
    with pytest.raises(errors.ParameterError, match="not authenticated"):
        guestoob.check_request(KEY, "n2", line)            # a replay gets another nonce
    with pytest.raises(errors.ParameterError, match="not authenticated"):
        guestoob.check_request(guestoob.auth_key("other"), "n1", line)
    forged = json.loads(line)
    forged["node"] = "node2.vcluster"
    with pytest.raises(errors.ParameterError, match="not authenticated"):
        guestoob.check_request(KEY, "n1", json.dumps(forged).encode())


@pytest.mark.parametrize("line", [b"", b"{", b"[]", b'{"command": "power-on"}',
                                  b'{"command": 1, "node": "x", "mac": "y"}'])
def test_a_malformed_request_is_refused(line: bytes) -> None:
    with pytest.raises(errors.ParameterError, match="malformed"):
        guestoob.check_request(KEY, "n", line)


def test_an_unknown_command_is_refused_even_when_signed() -> None:
    line = guestoob.request_line(KEY, "n", "reboot", "node1.vcluster")
    with pytest.raises(errors.ParameterError, match="unsupported"):
        guestoob.check_request(KEY, "n", line)


def test_answers_round_trip_and_a_broken_one_is_a_failure() -> None:
    assert guestoob.parse_answer(guestoob.answer(0, '{"powered": false}')) == \
        (0, '{"powered": false}', "")
    assert guestoob.parse_answer(guestoob.answer(1, error="no")) == (1, "", "no")
    status, out, err = guestoob.parse_answer(b"garbage")
    assert (status, out) == (1, "") and "bad answer" in err


def test_the_host_is_254_of_the_nodes_network() -> None:
    line = "console=ttyS0 vcg.host=node2.vcluster vcg.ip=10.213.7.2 vcg.prefix=24 quiet"
    assert guestoob.host_from_cmdline(line) == "10.213.7.254"
    assert guestoob.host_from_cmdline("vcg.ip=10.213.200.17 vcg.prefix=16") == "10.213.0.254"
    for bad in ("console=ttyS0", "vcg.ip=10.1.2 vcg.prefix=24", "vcg.ip=1.2.3.4 vcg.prefix=x"):
        with pytest.raises(ValueError):
            guestoob.host_from_cmdline(bad)


def test_the_clients_commands_are_the_protocols() -> None:
    assert sorted(guestoob_client.COMMANDS) == sorted(constants.OOB_COMMANDS)


def test_a_server_runs_authentic_requests_and_refuses_others() -> None:
    calls: list[tuple[str, str]] = []

    def execute(command: str, node: str) -> tuple[int, str, str]:
        calls.append((command, node))
        return 0, json.dumps({constants.OOB_POWER_STATUS_POWERED: False}), ""

    server = guestoob._Server(("127.0.0.1", 0), KEY, execute, lambda msg: None)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        def ask(key: bytes) -> tuple[int, str, str]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                reader = sock.makefile("rb")
                nonce = json.loads(reader.readline())["nonce"]
                sock.sendall(guestoob.request_line(key, nonce, "power-status", "node2"))
                return guestoob.parse_answer(reader.readline())

        assert ask(KEY) == (0, '{"powered": false}', "")
        status, _, err = ask(guestoob.auth_key("someone else"))
        assert status == 1 and "not authenticated" in err
        assert calls == [("power-status", "node2")]
    finally:
        server.shutdown()
        server.server_close()


def test_a_pid_file_naming_another_process_is_no_server(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    (tmp_path / guestoob.PID_FILE).write_text(f"{os.getpid()}\n")
    assert guestoob.server_pid(str(tmp_path)) is None
    guestoob.stop_server(str(tmp_path))          # kills nothing, forgets the file
    assert not (tmp_path / guestoob.PID_FILE).exists()
