"""The master's side of job filter rules (ganeti/server/filterrules.py), with
small stand-ins for the configuration and the queue."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.server import filterrules

GOOD = {"uuid": "0b8d4c6e-7d43-4d3e-9d40-28b1b2a1f1a3", "watermark": 3, "priority": 0,
        "predicates": [], "action": "PAUSE", "reason_trail": []}


class Queue:
    def __init__(self) -> None:
        self.rules: list[Any] = []

    def set_filter_rules(self, rules: list[Any]) -> None:
        self.rules = rules


class Context:
    def __init__(self, filters: dict[str, Any]) -> None:
        self.filters = filters
        self.queue = Queue()

    def committed_cfg(self) -> Any:
        return self

    def get_filters(self) -> dict[str, Any]:
        return self.filters

    def require_jqueue(self) -> Queue:
        return self.queue


def test_a_broken_stored_rule_is_logged_and_skipped_not_fatal(caplog):
    ctx = Context({"a": "not a rule", "b": {**GOOD, "uuid": "b", "action": "DROP"},
                   "c": {**GOOD, "uuid": "c", "predicates": [["jobid", ["=~", "id", "x"]]]},
                   GOOD["uuid"]: GOOD})
    filterrules.apply_rules(ctx)   # type: ignore[arg-type]
    assert [r.uuid for r in ctx.queue.rules] == [GOOD["uuid"]]
    assert caplog.text.count("Ignoring malformed job filter rule") == 3


def test_replace_refuses_bad_input_before_touching_anything():
    ctx = Context({})
    rules = filterrules.FilterRules(ctx)   # type: ignore[arg-type]
    with pytest.raises(errors.ParameterError, match="Unable to parse UUID"):
        rules.replace("nope", 0, [], "PAUSE", [])
    with pytest.raises(errors.ParameterError, match="Invalid filter action"):
        rules.replace(None, 0, [], "DROP", [])
    with pytest.raises(errors.ParameterError, match="compared"):
        rules.replace(None, 0, [["jobid", ["=~", "id", "watermark"]]], "PAUSE", [])
    assert ctx.filters == {} and ctx.queue.rules == []
