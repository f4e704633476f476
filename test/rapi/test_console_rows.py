"""The console token and WebSocket rows (ganeti/rapi/resources/instances.py): the
kind of console, the VNC password, and what an instance without VNC gets."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeLuxi
from ganeti import constants, errors
from ganeti.rapi import auth, consoletokens
from ganeti.rapi import resources as res
from ganeti.rapi.roles import Role

OLGA = auth.Principal("olga", Role.OPERATOR, auth.VIA_BASIC)
VNC = {"vnc_bind_address": "127.0.0.1", "vnc_password_file": "/etc/ganeti/vnc1"}


def _client(hvparams: dict[str, Any], running: bool = True) -> FakeLuxi:
    rows = {constants.QR_INSTANCE: {"name": "web1.example.com", "oper_state": running,
                                    "hvparams": hvparams, "pnode": "node2",
                                    "hypervisor": "kvm"},
            constants.QR_NODE: {"name": "node2", "pip": "192.0.2.2"}}

    def query(what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
        row = rows[what]
        return {"fields": [], "data": [[[0, row[f]] for f in fields]]}
    return FakeLuxi({"Query": query})


def _run(method: str, path: str, client: FakeLuxi, query: dict[str, list[str]],
         issued: list[tuple[str, str]], password: str | None = "s3cret") -> Any:
    route, args = res.match(method, path)

    def issue(instance: str, kind: str) -> tuple[str, float]:
        issued.append((instance, kind))
        return "tok", 30.0
    ctx = res.Ctx(method=method, args=args, query=query, body=None, client=client, path=path,
                  principal=OLGA, console_token=issue,
                  console_password=lambda path: password)
    return res.dispatch(route, ctx)


def test_a_serial_token_by_default():
    issued: list[tuple[str, str]] = []
    grant = _run("POST", "/2/instances/web1/console/token", _client(VNC), {}, issued)
    assert issued == [("web1.example.com", "serial")]
    assert grant == {"instance": "web1.example.com", "kind": "serial", "token": "tok",
                     "expires_in": 30.0,
                     "websocket": "/2/instances/web1.example.com/console/websocket"}


def test_a_vnc_token_carries_the_password_and_names_its_websocket():
    issued: list[tuple[str, str]] = []
    grant = _run("POST", "/2/instances/web1/console/token", _client(VNC),
                 {"kind": ["vnc"]}, issued)
    assert issued == [("web1.example.com", "vnc")]
    assert grant["password"] == "s3cret" and grant["kind"] == "vnc"
    assert grant["websocket"] == "/2/instances/web1.example.com/console/websocket?kind=vnc"


def test_a_vnc_token_without_a_password_file_has_no_password():
    grant = _run("POST", "/2/instances/web1/console/token",
                 _client({"vnc_bind_address": "0.0.0.0", "vnc_password_file": ""}),
                 {"kind": ["vnc"]}, [])
    assert "password" not in grant


@pytest.mark.parametrize("hvparams,query,password,status,text", [
    ({}, {"kind": ["vnc"]}, None, 400, "no VNC console"),
    (VNC, {"kind": ["spice"]}, None, 400, "Unknown console kind"),
    (VNC, {"kind": ["vnc"]}, None, 503, "cannot be read"),
], ids=["no-vnc", "unknown-kind", "unreadable-password"])
def test_token_refusals(hvparams, query, password, status, text):
    issued: list[tuple[str, str]] = []
    with pytest.raises(errors.HttpError) as info:
        _run("POST", "/2/instances/web1/console/token", _client(hvparams), query, issued,
             password=password)
    assert info.value.status == status and text in str(info.value)
    assert issued == []


def test_the_websocket_row_names_the_kind():
    opened = _run("GET", "/2/instances/web1/console/websocket", _client(VNC),
                  {"token": ["tok"], "kind": ["vnc"]}, [])
    assert opened == consoletokens.ConsoleOpen(
        "web1.example.com", "tok", node="node2", address="192.0.2.2", hypervisor="kvm",
        running=True, kind="vnc")
    serial = _run("GET", "/2/instances/web1/console/websocket", _client(VNC),
                  {"token": ["tok"]}, [])
    assert serial.kind == "serial"
