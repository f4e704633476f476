"""Job filter rules: checking, matching, order and the gate's bookkeeping (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.jqueue import filters as jf


def rule(uuid: str = "u1", *, watermark: int = 10, priority: int = 0,
         predicates: list[Any] | None = None, action: Any = jf.REJECT) -> jf.FilterRule:
    return jf.rule_from_dict({"uuid": uuid, "watermark": watermark, "priority": priority,
                              "predicates": predicates or [], "action": action,
                              "reason_trail": []})


def job(job_id: int = 11, *ops: dict[str, Any]) -> jf.JobView:
    return jf.JobView(job_id, list(ops) or [{"OP_ID": "OP_TEST_DELAY", "duration": 0}])


CREATE = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "beparams": {"memory": 512},
          "reason": [["gnt:client:gnt-instance", "add", 1], ["gnt:user", "maintenance pink", 2]]}


# -- checking input -------------------------------------------------------------

@pytest.mark.parametrize("action", ["ACCEPT", "PAUSE", "REJECT", "CONTINUE", ["RATE_LIMIT", 3]])
def test_every_action_of_ganeti_is_accepted(action: Any) -> None:
    assert jf.check_action(action) == action


@pytest.mark.parametrize("action", ["accept", "DROP", ["RATE_LIMIT"], ["RATE_LIMIT", 0],
                                    ["RATE_LIMIT", True], ["RATE_LIMIT", 2, 3], 5, None])
def test_a_bad_action_is_refused(action: Any) -> None:
    with pytest.raises(errors.ParameterError):
        jf.check_action(action)


def test_the_command_line_action_text_is_parsed() -> None:
    assert jf.parse_action_text("RATE_LIMIT 10") == ["RATE_LIMIT", 10]
    assert jf.parse_action_text("PAUSE") == "PAUSE"
    assert jf.action_text(["RATE_LIMIT", 10]) == "RATE_LIMIT 10"
    for bad in ("RATE_LIMIT", "RATE_LIMIT x", "RATE_LIMIT -1", "PAUSE now", ""):
        with pytest.raises(errors.ParameterError):
            jf.parse_action_text(bad)


@pytest.mark.parametrize("preds", [
    [["jobid", [">", "id", "watermark"]]],
    [["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]], ["reason", ["=~", "reason", "x"]]],
    [["opcode", ["&", ["?", "beparams.memory"], ["!", ["=[]", "tags", "a"]]]]],
    [],
])
def test_good_predicates_pass(preds: list[Any]) -> None:
    assert jf.check_predicates(preds) == preds


@pytest.mark.parametrize("preds, words", [
    ("x", "must be a list"),
    ([["nodeid", ["=", "id", 1]]], "jobid, opcode, reason"),
    ([["jobid"]], "takes one expression"),
    ([["jobid", ["=", "name", 1]]], "unknown field 'name'"),
    ([["reason", ["=", "user", "x"]]], "unknown field 'user'"),
    ([["opcode", ["~", "OP_ID", "x"]]], "unknown operator"),
    ([["opcode", ["=", "OP_ID"]]], "takes a field name and a value"),
    ([["opcode", ["=~", "OP_ID", "("]]], "invalid regular expression"),
    ([["opcode", ["!", ["?", "a"], ["?", "b"]]]], "'!' takes one expression"),
    ([["opcode", "OP_ID"]], "must be a list starting with an operator"),
    # the job id is compared with numbers or the watermark only
    ([["jobid", ["=~", "id", "watermark"]]], "compared"),
    ([["jobid", ["=[]", "id", 1]]], "compared"),
    ([["jobid", [">", "id", "7"]]], "compared"),
    ([["jobid", ["!", ["=", "id", True]]]], "compared"),
])
def test_bad_predicates_are_refused_with_the_reason(preds: Any, words: str) -> None:
    with pytest.raises(errors.ParameterError, match=words.replace("(", r"\(")):
        jf.check_predicates(preds)


def test_priority_and_reason_are_checked() -> None:
    assert jf.check_priority(3) == 3
    for bad in (-1, True, "1", 1.5):
        with pytest.raises(errors.ParameterError):
            jf.check_priority(bad)
    assert jf.check_reason([["a", "b", 1]]) == [["a", "b", 1]]
    for bad in ("x", [["a", "b"]], [[1, "b", 2]]):
        with pytest.raises(errors.ParameterError):
            jf.check_reason(bad)


# -- matching -------------------------------------------------------------------

def test_jobid_predicate_compares_with_the_watermark() -> None:
    above = rule(predicates=[["jobid", [">", "id", "watermark"]]], watermark=10)
    assert jf.matches(above, job(11))
    assert not jf.matches(above, job(10))
    exact = rule(predicates=[["jobid", ["=", "id", 7]]])
    assert jf.matches(exact, job(7)) and not jf.matches(exact, job(8))


def test_opcode_predicate_holds_when_one_opcode_matches() -> None:
    create = rule(predicates=[["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]])
    assert jf.matches(create, job(1, {"OP_ID": "OP_TEST_DELAY"}, CREATE))
    assert not jf.matches(create, job(1, {"OP_ID": "OP_TEST_DELAY"}))
    nested = rule(predicates=[["opcode", [">=", "beparams.memory", 512]]])
    assert jf.matches(nested, job(1, CREATE))
    # a parameter the opcode lacks makes the expression false for it, even under "!"'s
    # sibling: the opcode without beparams does not match
    assert not jf.matches(nested, job(1, {"OP_ID": "OP_TEST_DELAY"}))


def test_reason_predicate_looks_at_every_trail_entry() -> None:
    maint = rule(predicates=[["reason", ["=~", "reason", "pink"]]])
    assert jf.matches(maint, job(1, CREATE))
    assert not jf.matches(maint, job(1, {"OP_ID": "OP_TEST_DELAY", "reason": [["a", "b", 1]]}))
    src = rule(predicates=[["reason", ["&", ["=", "source", "gnt:user"],
                                       [">", "timestamp", 1]]]])
    assert jf.matches(src, job(1, CREATE))


def test_all_predicates_must_hold_and_none_means_every_job() -> None:
    both = rule(predicates=[["jobid", [">", "id", 5]],
                            ["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]])
    assert jf.matches(both, job(6, CREATE))
    assert not jf.matches(both, job(4, CREATE))
    assert jf.matches(rule(), job(1))


def test_rules_are_ordered_by_priority_then_watermark_then_uuid() -> None:
    rules = [rule("c", priority=1, watermark=1), rule("b", priority=0, watermark=5),
             rule("a", priority=0, watermark=5), rule("d", priority=0, watermark=2)]
    assert [r.uuid for r in jf.ordered(rules)] == ["d", "a", "b", "c"]


def test_continue_is_skipped_and_the_first_other_match_applies() -> None:
    rules = jf.ordered([rule("cont", priority=0, action=jf.CONTINUE),
                        rule("acc", priority=1, action=jf.ACCEPT,
                             predicates=[["reason", ["=", "reason", "allow this"]]]),
                        rule("rej", priority=2, action=jf.REJECT)])
    assert jf.applying(rules, job(1)).uuid == "rej"
    allowed = job(1, {"OP_ID": "OP_TEST_DELAY", "reason": [["gnt:user", "allow this", 1]]})
    assert jf.applying(rules, allowed).uuid == "acc"
    assert jf.applying(jf.ordered([rule("cont", action=jf.CONTINUE)]), job(1)) is None


def test_verdicts() -> None:
    limit = rule("lim", action=[jf.RATE_LIMIT, 2])
    assert jf.verdict([limit], job(1), {"lim": 1}) == (jf.RUN, limit)
    assert jf.verdict([limit], job(1), {"lim": 2}) == (jf.HOLD, limit)
    pause = rule("p", action=jf.PAUSE)
    assert jf.verdict([pause], job(1), {}) == (jf.HOLD, pause)
    rej = rule("r")
    assert jf.verdict([rej], job(1), {}) == (jf.REJECTED, rej)
    assert jf.rejection_message(rej) == "Job rejected by job filter rule r"
    assert jf.verdict([], job(1), {}) == (jf.RUN, None)


def test_a_stored_rule_round_trips_and_a_broken_one_is_refused() -> None:
    data = rule("x", action=[jf.RATE_LIMIT, 4]).to_dict()
    assert jf.rule_from_dict(data).to_dict() == data
    for broken in ({**data, "uuid": ""}, {**data, "watermark": -1}, {**data, "action": "NO"}):
        with pytest.raises(errors.ParameterError):
            jf.rule_from_dict(broken)


# -- the gate -------------------------------------------------------------------

def test_the_gate_counts_rate_limit_slots_and_wakes_the_held_when_one_frees() -> None:
    gate = jf.FilterGate()
    lim = rule("lim", action=[jf.RATE_LIMIT, 2])
    assert gate.set_rules([lim], []) == []
    assert gate.check(job(1))[0] == jf.RUN
    assert gate.check(job(2))[0] == jf.RUN
    assert gate.check(job(3))[0] == jf.HOLD
    assert gate.check(job(4))[0] == jf.HOLD
    assert gate.slots_taken() == {"lim": 2}
    assert gate.held() == {3: "lim", 4: "lim"}
    # one slot is free: one held job, the most urgent, is looked at again
    assert gate.release(1, urgency=lambda jid: -jid) == [4]
    assert gate.slots_taken() == {"lim": 1} and gate.held() == {3: "lim"}
    assert gate.release(99) == []


def test_new_rules_recount_the_running_jobs_and_release_every_held_job() -> None:
    gate = jf.FilterGate()
    gate.set_rules([rule("p", action=jf.PAUSE)], [])
    assert gate.check(job(5))[0] == jf.HOLD
    lim = rule("lim", action=[jf.RATE_LIMIT, 1])
    # job 1 was running when the limit came: it takes the one slot
    assert gate.set_rules([lim], [job(1)]) == [5]
    assert gate.slots_taken() == {"lim": 1}
    assert gate.check(job(5))[0] == jf.HOLD
    assert gate.release(1) == [5]
    assert gate.check(job(5))[0] == jf.RUN
    assert gate.check(job(6))[0] == jf.HOLD
    assert gate.release(5) == [6]


def test_unhold_forgets_a_held_job() -> None:
    gate = jf.FilterGate()
    gate.set_rules([rule("p", action=jf.PAUSE)], [])
    gate.check(job(5))
    gate.unhold(5)
    assert gate.held() == {}
    assert gate.rejecting(job(5)) is None
    gate.set_rules([rule("r")], [])
    assert gate.rejecting(job(5)).uuid == "r"


# -- ad-hoc rate limits (a reason "rate-limit:N:LABEL") ------------------------------

def adhoc(job_id: int, *reasons: str) -> jf.JobView:
    return jf.JobView(job_id, [{"OP_ID": "OP_TEST_DELAY",
                                "reason": [["gnt:user", r, 1] for r in reasons]}])


def test_adhoc_buckets_are_read_from_the_reasons() -> None:
    assert jf.adhoc_buckets(adhoc(1, "rate-limit:2:hello", "rate-limit:2:hello",
                                  "rate-limit:3:x:y", "rate-limit:0:z", "rate-limit:a:b",
                                  "maintenance")) == [("rate-limit:2:hello", 2),
                                                      ("rate-limit:3:x:y", 3)]
    assert jf.adhoc_buckets(job(1)) == []


def test_adhoc_limits_need_no_rule_and_free_their_slots() -> None:
    gate = jf.FilterGate()
    assert [gate.check(adhoc(i, "rate-limit:2:hello"))[0] for i in (1, 2, 3)] == [
        jf.RUN, jf.RUN, jf.HOLD]
    assert gate.held() == {3: "rate-limit:2:hello"}
    # another label, or the same label with another N, is another bucket
    assert gate.check(adhoc(4, "rate-limit:2:other"))[0] == jf.RUN
    assert gate.check(adhoc(5, "rate-limit:3:hello"))[0] == jf.RUN
    assert gate.check(job(6))[0] == jf.RUN
    assert gate.release(1) == [3]
    assert gate.check(adhoc(3, "rate-limit:2:hello"))[0] == jf.RUN


def test_a_job_needs_a_free_slot_in_every_bucket_it_is_in() -> None:
    gate = jf.FilterGate()
    gate.set_rules([rule("lim", action=[jf.RATE_LIMIT, 5])], [])
    assert gate.check(adhoc(1, "rate-limit:1:a"))[0] == jf.RUN
    assert gate.slots_taken() == {"lim": 1, "rate-limit:1:a": 1}
    assert gate.check(adhoc(2, "rate-limit:1:a"))[0] == jf.HOLD
    assert gate.slots_taken() == {"lim": 1, "rate-limit:1:a": 1}   # nothing taken by the hold
    # a rule change recounts the running job in both buckets
    assert gate.set_rules([rule("lim", action=[jf.RATE_LIMIT, 5])], [adhoc(1, "rate-limit:1:a")]) \
        == [2]
    assert gate.slots_taken() == {"lim": 1, "rate-limit:1:a": 1}
