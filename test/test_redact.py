"""The scrubber of secret values (ganeti.redact; doc/protocols/opcodes.md, "Private parameters")."""

from __future__ import annotations

import json
import logging

import pytest

from ganeti import opcodes
from ganeti.private import REDACTED, Private
from ganeti.redact import (MIN_SCRUB_LENGTH, Redactor, VersionedSource, private_values,
                           scrub_data, scrub_text, secret_texts, values_under_keys)
from ganeti.server.logsetup import RedactingFilter

SECRET = "s3cret-value"


@pytest.mark.parametrize("text, expected", [
    (f"invalid value '{SECRET}' for token", f"invalid value '{REDACTED}' for token"),
    (f"{SECRET}{SECRET}", f"{REDACTED}{REDACTED}"),
    ("nothing secret here", "nothing secret here"),
    (f"prefix-{SECRET}-suffix", f"prefix-{REDACTED}-suffix"),
], ids=["quoted", "twice", "absent", "inside-a-word"])
def test_scrub_text_replaces_every_occurrence(text: str, expected: str) -> None:
    assert scrub_text(text, secret_texts(SECRET)) == expected


def test_escaped_forms_are_scrubbed_too() -> None:
    value = 'a"b\\c-d'
    texts = secret_texts(value)
    assert scrub_text("json: " + json.dumps(value), texts) == f'json: "{REDACTED}"'
    assert scrub_text(f"repr: {value!r}", texts) == f"repr: '{REDACTED}'"


def test_longest_value_wins_when_one_contains_another() -> None:
    texts = secret_texts("abcd") | secret_texts("abcdefgh")
    assert scrub_text("xabcdefghx", texts) == f"x{REDACTED}x"


def test_regex_characters_are_literal() -> None:
    assert scrub_text("a.*b and aXXb", secret_texts("a.*b")) == f"{REDACTED} and aXXb"


@pytest.mark.parametrize("value", ["", "a", "ab", "abc", 7, 123, True, None],
                         ids=["empty", "1", "2", "3", "int-1", "int-3", "bool", "none"])
def test_short_values_are_not_scrubbed_from_free_text(value: object) -> None:
    # the documented policy: shorter than MIN_SCRUB_LENGTH characters is too short
    assert secret_texts(value) == set()
    assert scrub_text("abc 123 7 True", secret_texts(value)) == "abc 123 7 True"


def test_numbers_from_the_minimum_length_on_are_scrubbed() -> None:
    value = int("1" * MIN_SCRUB_LENGTH)
    assert scrub_text(f"port {value}", secret_texts(value)) == f"port {REDACTED}"


def test_the_marker_itself_is_no_secret() -> None:
    assert secret_texts(REDACTED) == set()


def test_scrub_data_walks_json_data_and_keeps_other_values() -> None:
    data = ["OpPrereqError", [f"refused {SECRET}", 3, None, {SECRET: [f"x{SECRET}", 1.5]}]]
    assert scrub_data(data, secret_texts(SECRET)) == [
        "OpPrereqError", [f"refused {REDACTED}", 3, None, {REDACTED: [f"x{REDACTED}", 1.5]}]]


def test_private_values_of_an_opcode() -> None:
    op = opcodes.from_dict({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1",
                            "disk_template": "diskless", "osparams": {"v": "public"},
                            "osparams_private": {"p": "priv-1"},
                            "osparams_secret": {"s": "secret-1"}})
    assert sorted(private_values([op])) == ["priv-1", "secret-1"]
    assert private_values({"a": [Private("x1234")], "b": "plain"}) == ["x1234"]


def test_values_under_private_keys_in_rpc_arguments() -> None:
    args = [{"name": "i1", "osparams": {"v": "public"}, "osparams_private": {"p": "priv-1"}},
            False, {"nested": [{"osparams_secret": {"s": "secret-1"}}]}]
    assert sorted(values_under_keys(args)) == ["priv-1", "secret-1"]


def test_redactor_holds_values_while_in_use() -> None:
    red = Redactor()
    with red.hold([SECRET]):
        with red.hold([SECRET]):      # a second holder of the same value
            pass
        assert red.scrub(SECRET) == REDACTED
    assert red.scrub(SECRET) == SECRET


def test_redactor_sources_are_recomputed_on_a_new_version() -> None:
    version, values = [1], [["first-value"]]
    calls: list[int] = []

    def current() -> list[str]:
        calls.append(1)
        return values[0]

    red = Redactor([VersionedSource(lambda: version[0], current)])
    assert red.scrub("first-value second-value") == f"{REDACTED} second-value"
    assert red.scrub("first-value") == REDACTED and len(calls) == 1
    values[0], version[0] = ["second-value"], 2
    assert red.scrub("first-value second-value") == f"first-value {REDACTED}"


def _record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError(f"bad {SECRET}")
        except ValueError as err:
            exc_info = (type(err), err, err.__traceback__)
    return logging.LogRecord("t", logging.INFO, __file__, 1, msg, args or None, exc_info)


def test_log_filter_scrubs_message_arguments_and_traceback() -> None:
    red = Redactor()
    filt = RedactingFilter(red)
    fmt = logging.Formatter("%(message)s")
    with red.hold([SECRET]):
        record = _record("RPC %s failed: %s", "os_validate", f"value '{SECRET}'", exc=True)
        assert filt.filter(record)
        text = fmt.format(record)
    assert SECRET not in text
    assert f"RPC os_validate failed: value '{REDACTED}'" in text
    assert f"ValueError: bad {REDACTED}" in text


def test_log_filter_leaves_other_records_alone() -> None:
    filt = RedactingFilter(Redactor())
    record = _record("plain %s", "text")
    assert filt.filter(record) and record.msg == "plain %s" and record.args == ("text",)
