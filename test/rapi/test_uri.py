"""Paths split before decoding; ids of ASCII digits with a bounded length."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.rapi import resources as res
from ganeti.rapi import uri


@pytest.mark.parametrize("raw, segments", [
    ("/", []),
    ("/2/instances/web", ["2", "instances", "web"]),
    ("/2/instances/web%2Fstartup", ["2", "instances", "web/startup"]),
    ("/2/instances/w%C3%A9b", ["2", "instances", "wéb"]),
    ("/2/instances/", ["2", "instances", ""]),
], ids=["root", "plain", "encoded-slash", "utf8", "trailing-slash"])
def test_split_path_decodes_each_segment_after_splitting(raw, segments):
    assert uri.split_path(raw) == segments


@pytest.mark.parametrize("raw, status", [
    ("2/x", 400), ("/2/%FF", 400), ("/2/a%00b", 404), ("/2/a%0Ab", 404),
], ids=["relative", "not-utf8", "nul", "newline"])
def test_split_path_refuses(raw, status):
    with pytest.raises(errors.HttpError) as exc:
        uri.split_path(raw)
    assert exc.value.status == status


def test_an_encoded_slash_never_separates():
    # the startup row must not match; the instance row neither (no name holds "/")
    for method in ("PUT", "GET", "DELETE"):
        with pytest.raises(errors.HttpError) as exc:
            res.match(method, "/2/instances/web%2Fstartup")
        assert exc.value.status == 404
    assert res.allowed_methods("/2/instances/web%2Fstartup") == []
    route, args = res.match("PUT", "/2/instances/web/startup")
    assert route.path.endswith("/startup") and args == {"instance": "web"}


def test_percent_encoded_literals_and_names_still_match():
    route, args = res.match("PUT", "/2/instances/we%62/%73tartup")
    assert route.path.endswith("/startup") and args == {"instance": "web"}


@pytest.mark.parametrize("text, value", [("0", 0), ("42", 42), ("007", 7),
                                         ("9223372036854775807", 2 ** 63 - 1),
                                         ("0" * 5000 + "5", 5)])
def test_parse_id(text, value):
    assert uri.parse_id(text, "job id") == value


@pytest.mark.parametrize("text, status", [
    ("²", 400), ("١٢", 400), ("", 400), ("-1", 400), ("1.0", 400), (" 1", 400),
    ("9223372036854775808", 404), ("9" * 5000, 404),
], ids=["superscript", "arabic-digits", "empty", "negative", "float", "space",
        "int64+1", "5000-digits"])
def test_parse_id_refuses_without_a_traceback(text, status):
    with pytest.raises(errors.HttpError) as exc:
        uri.parse_id(text, "job id")
    assert exc.value.status == status
    assert len(str(exc.value)) < 200          # the bad value is shown shortened
