"""Tests for ganeti.utils.payload (file contents inside RPC arguments)."""

from __future__ import annotations

import base64
import os
import zlib

import pytest

from ganeti import errors, serializer
from ganeti.utils import payload


@pytest.mark.parametrize("data", [
    b"", b"{}", "n\u00e9ud \u2603\n".encode(), os.urandom(4096), b"\x00\xff" * 1000,
], ids=["empty", "small", "utf8", "random", "binary"])
def test_compressed_round_trip_is_exact(data: bytes) -> None:
    value = payload.encode_payload(data)
    assert value[0] == payload.ENCODING_ZLIB_BASE64
    assert payload.decode_payload(value) == data


def test_round_trip_survives_the_json_body() -> None:
    data = ('{"instances": {' + ",".join(f'"i{i}": {{"os": "debian"}}' for i in range(500))
            + "}}").encode()
    body = serializer.dumps_bytes([["/var/lib/ganeti/config.data", payload.encode_payload(data)]])
    assert payload.decode_payload(serializer.loads(body)[0][1]) == data
    assert len(body) * 5 < len(data)            # the point of it: a much smaller body


def test_uncompressed_form_round_trip() -> None:
    value = payload.encode_payload("caf\u00e9".encode(), compress=False)
    assert value == [payload.ENCODING_NONE, "caf\u00e9"]
    assert payload.decode_payload(value) == "caf\u00e9".encode()


def test_plain_string_is_still_accepted() -> None:
    assert payload.decode_payload('{"serial": 3}') == b'{"serial": 3}'


@pytest.mark.parametrize("value, message", [
    ([9, "abc"], r"Unknown content encoding 9 \(known: 0, 1\)"),
    (["zlib", "abc"], "Invalid content"),
    ([True, "abc"], "Invalid content"),
    ([1], "Invalid content"),
    ([1, 2], "Invalid content"),
    (None, "Invalid content"),
    ([1, "%%%%"], "Invalid base64 content"),
    ([1, "caf\u00e9"], "Invalid base64 content"),
    ([1, base64.b64encode(b"plain bytes").decode()], "Invalid zlib content"),
    ([1, base64.b64encode(zlib.compress(b"x" * 100)[:-4]).decode()], "truncated"),
    ([1, base64.b64encode(zlib.compress(b"x") + b"junk").decode()], "trailing"),
], ids=["unknown", "name-not-number", "bool", "short", "data-not-text", "none", "bad-b64",
        "non-ascii", "not-zlib", "truncated", "trailing"])
def test_bad_values_are_refused_clearly(value, message: str) -> None:
    with pytest.raises(errors.OpExecError, match=message):
        payload.decode_payload(value)


@pytest.mark.parametrize("value", [
    payload.encode_payload(b"y" * 10_000), payload.encode_payload(b"y" * 10_000, compress=False),
    "y" * 10_000,
], ids=["compressed", "uncompressed", "plain"])
def test_size_limit_applies_to_the_decoded_content(value) -> None:
    assert payload.decode_payload(value, max_size=10_000) == b"y" * 10_000
    with pytest.raises(errors.OpExecError, match="larger than 9999 bytes"):
        payload.decode_payload(value, max_size=9999)
