"""Console tokens (ganeti/rapi/consoletokens.py): single use, expiry, one instance."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.rapi import consoletokens
from test.fakes.clock import FakeClock


def _grant(instance: str = "web1.example.com") -> consoletokens.Grant:
    return consoletokens.Grant(instance, "olga", lambda: True)


def _refusal(store: consoletokens.ConsoleTokens, token: str | None, instance: str) -> str:
    with pytest.raises(errors.HttpError) as info:
        store.redeem(token, instance)
    assert info.value.status == 403
    return str(info.value)


def test_a_token_opens_its_instance_once():
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    token, ttl = store.issue(_grant())
    assert ttl == consoletokens.TOKEN_TTL and len(token) >= 40
    assert store.redeem(token, "web1.example.com").user == "olga"
    assert "already used" in _refusal(store, token, "web1.example.com")


def test_a_token_expires():
    clock = FakeClock()
    store = consoletokens.ConsoleTokens(clock=clock, ttl=30)
    token, _ = store.issue(_grant())
    clock.advance(30)
    assert "Expired" in _refusal(store, token, "web1.example.com")


def test_a_token_just_before_its_end_still_works():
    clock = FakeClock()
    store = consoletokens.ConsoleTokens(clock=clock, ttl=30)
    token, _ = store.issue(_grant())
    clock.advance(29.9)
    assert store.redeem(token, "web1.example.com").instance == "web1.example.com"


def test_a_token_does_not_open_another_instance_and_is_burnt():
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    token, _ = store.issue(_grant("web1.example.com"))
    assert "another instance" in _refusal(store, token, "db1.example.com")
    assert "already used" in _refusal(store, token, "web1.example.com")


@pytest.mark.parametrize("token", [None, "", "made-up"], ids=["none", "empty", "unknown"])
def test_missing_or_unknown_tokens(token):
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    store.issue(_grant())
    _refusal(store, token, "web1.example.com")


def test_the_store_is_bounded_and_drops_expired_tokens():
    clock = FakeClock()
    store = consoletokens.ConsoleTokens(clock=clock, ttl=30, max_tokens=2)
    store.issue(_grant())
    store.issue(_grant())
    with pytest.raises(errors.HttpError) as info:
        store.issue(_grant())
    assert info.value.status == 503
    clock.advance(31)
    store.issue(_grant())
    assert len(store) == 1


def test_only_digests_are_kept():
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    token, _ = store.issue(_grant())
    assert token.encode() not in repr(store._live).encode()


@pytest.mark.parametrize("line,shown", [
    ("GET /2/instances/a/console/websocket?token=s3cr3t HTTP/1.1",
     "GET /2/instances/a/console/websocket?token=- HTTP/1.1"),
    ("GET /x?a=1&token=s3cr3t&b=2 HTTP/1.1", "GET /x?a=1&token=-&b=2 HTTP/1.1"),
    ("GET /2/info HTTP/1.1", "GET /2/info HTTP/1.1"),
], ids=["first", "middle", "none"])
def test_redact(line, shown):
    assert consoletokens.redact(line) == shown


def test_a_token_opens_the_kind_of_console_it_was_made_for():
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    token, _ = store.issue(consoletokens.Grant("web1.example.com", "olga", lambda: True,
                                               consoletokens.KIND_VNC))
    assert store.redeem(token, "web1.example.com", consoletokens.KIND_VNC).kind == "vnc"


@pytest.mark.parametrize("made,spent", [("serial", "vnc"), ("vnc", "serial")],
                         ids=["serial-for-vnc", "vnc-for-serial"])
def test_a_token_does_not_open_another_kind_of_console_and_is_burnt(made, spent):
    store = consoletokens.ConsoleTokens(clock=FakeClock())
    token, _ = store.issue(consoletokens.Grant("web1.example.com", "olga", lambda: True, made))
    with pytest.raises(errors.HttpError) as info:
        store.redeem(token, "web1.example.com", spent)
    assert info.value.status == 403 and f"for the {made} console" in str(info.value)
    with pytest.raises(errors.HttpError):
        store.redeem(token, "web1.example.com", made)


def test_a_grant_is_for_the_serial_console_unless_told():
    assert _grant().kind == consoletokens.KIND_SERIAL
