"""Job filter rules: what they are, how they are checked and which one applies.

Pure logic, no I/O (doc/jobfilters.md).  A rule is part of the cluster
configuration (``filters`` at its root, keyed by UUID) and has the fields
of Ganeti's filter rules:

* ``uuid``; ``watermark``: the highest job id in use when the rule was
  added or replaced; ``priority``: a non-negative integer, rules are
  looked at in order of ``(priority, watermark, uuid)``;
* ``predicates``: a list of ``[name, expression]``; the rule matches a job
  when every predicate holds (an empty list: every job).  ``expression``
  is a query-language filter (:mod:`ganeti.query.filter`'s operators):

  - ``jobid``: one field, ``id``; the value ``"watermark"`` stands for
    the rule's watermark;
  - ``opcode``: ``OP_ID`` and every parameter of an opcode (dotted names
    reach into dicts); true when it holds for at least one opcode of the
    job; a parameter the opcode does not have makes it false for it;
  - ``reason``: ``source``, ``reason``, ``timestamp`` of a reason trail
    entry; true when it holds for one entry of one opcode;

* ``action``: ``ACCEPT``, ``PAUSE``, ``REJECT``, ``CONTINUE`` or
  ``["RATE_LIMIT", n]``;
* ``reason_trail``: why the rule is there.

The rule that *applies* to a job is the first matching one whose action
is not ``CONTINUE`` (:func:`applying`); :func:`verdict` turns it into what
the queue does with a job that has not started: run it, hold it (PAUSE,
or RATE_LIMIT with its ``n`` slots taken by running jobs), or reject it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ganeti import errors

__all__ = ["ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT", "ACTIONS", "PREDICATES",
           "FilterRule", "JobView", "check_priority", "check_predicates", "check_action",
           "check_reason", "parse_action_text", "action_text", "rule_from_dict", "ordered",
           "matches", "applying", "verdict", "RUN", "HOLD", "REJECTED", "rejection_message",
           "FilterGate", "ADHOC_PREFIX", "adhoc_buckets"]

ACCEPT = "ACCEPT"
PAUSE = "PAUSE"
REJECT = "REJECT"
CONTINUE = "CONTINUE"
RATE_LIMIT = "RATE_LIMIT"
ACTIONS = (ACCEPT, PAUSE, REJECT, CONTINUE, RATE_LIMIT)
PREDICATES = ("jobid", "opcode", "reason")

#: What :func:`verdict` answers.
RUN = "run"
HOLD = "hold"
REJECTED = "reject"

_MAX_DEPTH = 50
_MAX_PREDICATES = 100
_REASON_FIELDS = frozenset(["source", "reason", "timestamp"])
_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_EQUALITY: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne}
_BINARY = frozenset([*_ORDERING, *_EQUALITY, "=~", "=[]"])
_MISSING = object()

Getter = Callable[[str], Any]          # a field's value, or _MISSING


class FilterRule:
    """One rule, checked (see :func:`rule_from_dict`)."""

    __slots__ = ("uuid", "watermark", "priority", "predicates", "action", "reason_trail",
                 "tests", "kind", "limit")

    def __init__(self, uuid: str, watermark: int, priority: int, predicates: list[Any],
                 action: Any, reason_trail: list[Any]) -> None:
        self.uuid = uuid
        self.watermark = watermark
        self.priority = priority
        self.predicates = predicates
        self.action = action
        self.reason_trail = reason_trail
        #: the predicates compiled (they must have passed :func:`check_predicates`)
        self.tests = [_compile_predicate(pred, watermark) for pred in predicates]
        #: the action's name (``RATE_LIMIT`` for ``["RATE_LIMIT", n]``)
        self.kind: str = action[0] if isinstance(action, list) else action
        #: ``n`` of a ``RATE_LIMIT`` rule (0 for other actions)
        self.limit: int = action[1] if isinstance(action, list) else 0

    def to_dict(self) -> dict[str, Any]:
        """The rule as the configuration stores it."""
        return {"uuid": self.uuid, "watermark": self.watermark, "priority": self.priority,
                "predicates": self.predicates, "action": self.action,
                "reason_trail": self.reason_trail}

    def __repr__(self) -> str:
        return f"FilterRule({self.uuid!r}, {self.kind})"


class JobView:
    """What the predicates see of a job: its id and its opcodes as dicts
    (``OP_ID`` and the parameters, ``reason`` the trail)."""

    __slots__ = ("id", "ops")

    def __init__(self, job_id: int, ops: Sequence[Mapping[str, Any]]) -> None:
        self.id = job_id
        self.ops = ops


# -- checking input ---------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_priority(value: Any) -> int:
    """A rule priority: a non-negative integer."""
    if not _is_int(value) or value < 0:
        raise errors.ParameterError(
            f"Filter priority must be a non-negative integer, got {value!r}", errors.ECODE_INVAL)
    return int(value)


def check_action(value: Any) -> Any:
    """An action as the wire and the configuration carry it."""
    if isinstance(value, str) and value in ACTIONS and value != RATE_LIMIT:
        return value
    if (isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == RATE_LIMIT
            and _is_int(value[1]) and value[1] > 0):
        return [RATE_LIMIT, int(value[1])]
    if isinstance(value, (list, tuple)) and value and value[0] == RATE_LIMIT:
        raise errors.ParameterError(
            f"RATE_LIMIT takes one positive integer, got {list(value[1:])!r}", errors.ECODE_INVAL)
    raise errors.ParameterError(
        f"Invalid filter action {value!r}: one of ACCEPT, PAUSE, REJECT, CONTINUE or"
        " [\"RATE_LIMIT\", n]", errors.ECODE_INVAL)


def parse_action_text(text: str) -> Any:
    """The command line's action (``PAUSE``, ``RATE_LIMIT 10``) in wire form."""
    words = text.split()
    if len(words) == 2 and words[0] == RATE_LIMIT:
        try:
            count = int(words[1])
        except ValueError:
            count = -1
        if count > 0:
            return [RATE_LIMIT, count]
        raise errors.ParameterError(
            f"RATE_LIMIT takes a positive integer, got {words[1]!r}", errors.ECODE_INVAL)
    if len(words) == 1:
        return check_action(words[0])
    raise errors.ParameterError(
        f"Invalid filter action {text!r}: one of ACCEPT, PAUSE, REJECT, CONTINUE or"
        " 'RATE_LIMIT n'", errors.ECODE_INVAL)


def action_text(action: Any) -> str:
    """An action as the command line shows it (``RATE_LIMIT 10``)."""
    if isinstance(action, list):
        return " ".join(str(part) for part in action)
    return str(action)


def check_reason(value: Any) -> list[list[Any]]:
    """A reason trail: a list of ``[source, reason, timestamp]``."""
    if not isinstance(value, list):
        raise errors.ParameterError(f"A reason trail must be a list, got {value!r}",
                                    errors.ECODE_INVAL)
    trail = []
    for entry in value:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                or not isinstance(entry[0], str) or not isinstance(entry[1], str)
                or not (_is_int(entry[2]) or isinstance(entry[2], float))):
            raise errors.ParameterError(
                f"A reason trail entry must be [source, reason, timestamp], got {entry!r}",
                errors.ECODE_INVAL)
        trail.append(list(entry))
    return trail


def _check_expression(expr: Any, fields: frozenset[str] | None, where: str,
                      depth: int = 0, *, job_ids: bool = False) -> None:
    """Raise ParameterError unless ``expr`` is a filter over ``fields``
    (None: any field name); ``job_ids``: comparisons of the job id with an
    integer or ``"watermark"`` only (the ``jobid`` predicate)."""
    if depth > _MAX_DEPTH:
        raise errors.ParameterError(f"{where}: expression nested deeper than {_MAX_DEPTH}",
                                    errors.ECODE_INVAL)
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        raise errors.ParameterError(
            f"{where}: an expression must be a list starting with an operator, got {expr!r}",
            errors.ECODE_INVAL)
    op, args = expr[0], expr[1:]
    if op in ("&", "|"):
        for sub in args:
            _check_expression(sub, fields, where, depth + 1, job_ids=job_ids)
        return
    if op == "!":
        if len(args) != 1:
            raise errors.ParameterError(f"{where}: '!' takes one expression",
                                        errors.ECODE_INVAL)
        _check_expression(args[0], fields, where, depth + 1, job_ids=job_ids)
        return
    if op == "?":
        want = 1
    elif op in _BINARY:
        want = 2
    else:
        raise errors.ParameterError(f"{where}: unknown operator {op!r}", errors.ECODE_INVAL)
    if len(args) != want:
        raise errors.ParameterError(
            f"{where}: operator '{op}' takes a field name{' and a value' if want == 2 else ''}",
            errors.ECODE_INVAL)
    name = args[0]
    if not isinstance(name, str) or not name:
        raise errors.ParameterError(f"{where}: a field name must be a string, got {name!r}",
                                    errors.ECODE_INVAL)
    if fields is not None and name not in fields:
        raise errors.ParameterError(
            f"{where}: unknown field {name!r} (known: {', '.join(sorted(fields))})",
            errors.ECODE_INVAL)
    if job_ids and op != "?" and (op not in _EQUALITY and op not in _ORDERING
                                  or not (_is_int(args[1]) or args[1] == "watermark")):
        raise errors.ParameterError(
            f"{where}: the job id is compared (=, !=, <, <=, >, >=) with an integer or"
            f" \"watermark\", got {expr!r}", errors.ECODE_INVAL)
    if op == "=~":
        if not isinstance(args[1], str):
            raise errors.ParameterError(f"{where}: '=~' takes a regular expression string",
                                        errors.ECODE_INVAL)
        try:
            re.compile(args[1])
        except re.error as exc:
            raise errors.ParameterError(f"{where}: invalid regular expression {args[1]!r}: {exc}",
                                        errors.ECODE_INVAL) from None


def check_predicates(value: Any) -> list[Any]:
    """A predicate list: ``[[name, expression], ...]`` (names: :data:`PREDICATES`)."""
    if not isinstance(value, list):
        raise errors.ParameterError(f"Filter predicates must be a list, got {value!r}",
                                    errors.ECODE_INVAL)
    if len(value) > _MAX_PREDICATES:
        raise errors.ParameterError(f"At most {_MAX_PREDICATES} predicates per filter",
                                    errors.ECODE_INVAL)
    for pred in value:
        if not isinstance(pred, list) or not pred or pred[0] not in PREDICATES:
            raise errors.ParameterError(
                f"A predicate must be [name, expression] with name one of"
                f" {', '.join(PREDICATES)}, got {pred!r}", errors.ECODE_INVAL)
        if len(pred) != 2:
            raise errors.ParameterError(
                f"Predicate '{pred[0]}' takes one expression, got {pred[1:]!r}",
                errors.ECODE_INVAL)
        fields = {"jobid": frozenset(["id"]), "reason": _REASON_FIELDS}.get(pred[0])
        _check_expression(pred[1], fields, f"Predicate '{pred[0]}'",
                          job_ids=pred[0] == "jobid")
    return value


def rule_from_dict(data: Mapping[str, Any]) -> FilterRule:
    """A stored rule, checked; :class:`errors.ParameterError` when malformed."""
    uuid = data.get("uuid")
    watermark: Any = data.get("watermark")
    if not isinstance(uuid, str) or not uuid:
        raise errors.ParameterError(f"Filter rule without a UUID: {data!r}", errors.ECODE_INVAL)
    if not _is_int(watermark) or watermark < 0:
        raise errors.ParameterError(f"Filter rule {uuid}: bad watermark {watermark!r}",
                                    errors.ECODE_INVAL)
    return FilterRule(uuid, int(watermark), check_priority(data.get("priority")),
                      check_predicates(data.get("predicates")),
                      check_action(data.get("action")),
                      check_reason(data.get("reason_trail", [])))


# -- evaluation ----------------------------------------------------------------
# A rule's predicates are compiled once into closures (a rule is checked
# against every job the queue starts; doc/jobfilters.md, "Cost").

Test = Callable[[Any], bool]
Access = Callable[[str], Callable[[Any], Any]]


def _compile(expr: list[Any], access: Access, value_of: Callable[[Any], Any]) -> Test:
    """``expr`` (checked by :func:`_check_expression`) as a test of one item;
    ``access(name)`` reads a field of an item (:data:`_MISSING` when absent):
    a comparison on an absent field is false."""
    op = expr[0]
    if op in ("&", "|"):
        subs = [_compile(sub, access, value_of) for sub in expr[1:]]
        if op == "&":
            return lambda item: all(sub(item) for sub in subs)
        return lambda item: any(sub(item) for sub in subs)
    if op == "!":
        inner = _compile(expr[1], access, value_of)
        return lambda item: not inner(item)
    get = access(expr[1])
    if op == "?":
        return lambda item: (v := get(item)) is not _MISSING and bool(v)
    right = value_of(expr[2])
    if op in _EQUALITY:
        same = _EQUALITY[op]
        return lambda item: (v := get(item)) is not _MISSING and same(v, right)
    if op in _ORDERING:
        order = _ORDERING[op]
        if isinstance(right, str):
            return lambda item: isinstance(v := get(item), str) and order(v, right)
        if _is_int(right) or isinstance(right, float):
            return lambda item: ((_is_int(v := get(item)) or isinstance(v, float))
                                 and order(v, right))
        return lambda item: False
    if op == "=~":
        pattern = re.compile(right)
        return lambda item: isinstance(v := get(item), str) and pattern.search(v) is not None
    # "=[]"
    return lambda item: isinstance(v := get(item), list) and right in v


def _same(value: Any) -> Any:
    return value


def _opcode_field(name: str) -> Callable[[Any], Any]:
    if "." not in name:
        return lambda op: op.get(name, _MISSING)
    parts = name.split(".")

    def dotted(op: Any) -> Any:
        value = op
        for part in parts:
            if not isinstance(value, Mapping) or part not in value:
                return _MISSING
            value = value[part]
        return value
    return dotted


def _reason_field(name: str) -> Callable[[Any], Any]:
    idx = ("source", "reason", "timestamp").index(name)
    return lambda entry: entry[idx]


def _job_field(name: str) -> Callable[[Any], Any]:
    return _same if name == "id" else (lambda job_id: _MISSING)


def _reason_entries(job: JobView) -> Iterable[Any]:
    for op in job.ops:
        for entry in op.get("reason") or ():
            if isinstance(entry, (list, tuple)) and len(entry) == 3:
                yield entry


def _compile_predicate(pred: list[Any], watermark: int) -> Callable[[JobView], bool]:
    name, expr = pred
    if name == "jobid":
        test = _compile(expr, _job_field,
                        lambda value: watermark if value == "watermark" else value)
        return lambda job: test(job.id)
    if name == "opcode":
        optest = _compile(expr, _opcode_field, _same)

        def any_opcode(job: JobView) -> bool:
            for op in job.ops:
                if optest(op):
                    return True
            return False
        return any_opcode
    rtest = _compile(expr, _reason_field, _same)
    return lambda job: any(rtest(entry) for entry in _reason_entries(job))


def matches(rule: FilterRule, job: JobView) -> bool:
    """Whether every predicate of ``rule`` holds for ``job``."""
    for test in rule.tests:
        if not test(job):
            return False
    return True


def ordered(rules: Iterable[FilterRule]) -> list[FilterRule]:
    """Rules in the order they are looked at: priority, watermark, UUID."""
    return sorted(rules, key=lambda r: (r.priority, r.watermark, r.uuid))


def applying(rules: Sequence[FilterRule], job: JobView) -> FilterRule | None:
    """The first rule of ``rules`` (already :func:`ordered`) that matches
    ``job`` and is not ``CONTINUE``; None when there is none."""
    for rule in rules:
        if rule.kind != CONTINUE and matches(rule, job):
            return rule
    return None


def verdict(rules: Sequence[FilterRule], job: JobView,
            slots_taken: Mapping[str, int]) -> tuple[str, FilterRule | None]:
    """What to do now with ``job``, which has not started.

    ``(RUN, rule)`` (rule None, ACCEPT, or a RATE_LIMIT with a free slot:
    starting the job takes it), ``(HOLD, rule)`` (PAUSE, or a RATE_LIMIT
    whose ``n`` slots ``slots_taken[uuid]`` are all taken) or
    ``(REJECTED, rule)``.
    """
    rule = applying(rules, job)
    if rule is None or rule.kind == ACCEPT:
        return RUN, rule
    if rule.kind == REJECT:
        return REJECTED, rule
    if rule.kind == PAUSE:
        return HOLD, rule
    return (RUN, rule) if slots_taken.get(rule.uuid, 0) < rule.limit else (HOLD, rule)


def rejection_message(rule: FilterRule) -> str:
    """The error a rejected job ends with (names the rule)."""
    return f"Job rejected by job filter rule {rule.uuid}"


#: the start of a reason that rate-limits ad hoc: ``rate-limit:N:LABEL``
ADHOC_PREFIX = "rate-limit:"


def adhoc_buckets(job: JobView) -> list[tuple[str, int]]:
    """The ad-hoc rate-limit buckets of ``job``: ``(key, n)`` for every
    distinct reason ``rate-limit:N:LABEL`` (N a positive integer) in the
    reason trails of its opcodes, as Ganeti's scheduler reads them; the key
    is the reason itself, so the same label with another N is another
    bucket."""
    found: dict[str, int] = {}
    for op in job.ops:
        for entry in op.get("reason") or ():
            if (isinstance(entry, (list, tuple)) and len(entry) == 3
                    and isinstance(entry[1], str) and entry[1].startswith(ADHOC_PREFIX)):
                count = entry[1][len(ADHOC_PREFIX):].split(":", 1)[0]
                if count.isdigit() and int(count) > 0:
                    found.setdefault(entry[1], int(count))
    return list(found.items())


class FilterGate:
    """The queue's filter state: the rules, the rate-limit slots of running
    jobs and the jobs held back.  Pure bookkeeping: the queue calls it
    under its own lock and does the I/O (doc/jobfilters.md, "In the queue").

    Slots are counted per *bucket*: a RATE_LIMIT rule (keyed by its UUID)
    or an ad-hoc ``rate-limit:N:LABEL`` reason (:func:`adhoc_buckets`,
    keyed by the reason).  A job takes a slot of each of its buckets when
    it starts, and gives them back when it ends or waits for a dependency
    (:meth:`release`).  Replacing the rules (:meth:`set_rules`) recounts
    the slots of the running jobs against the new rules, as Ganeti does: a
    rule added while jobs it matches run limits new starts until those
    have ended.
    """

    def __init__(self) -> None:
        self.rules: list[FilterRule] = []
        self._by_uuid: dict[str, FilterRule] = {}
        #: whether some rule can hold a job back or reject it
        self.filtering = False
        #: whether some rule rejects
        self.rejects = False
        self._slots: dict[int, list[str]] = {}     # running job id -> its buckets
        self._taken: dict[str, int] = {}           # bucket -> slots taken
        self._adhoc_limits: dict[str, int] = {}    # ad-hoc bucket -> its N
        self._held: dict[int, str] = {}            # held job id -> the bucket or rule holding it

    def held(self) -> dict[int, str]:
        """The jobs held back, with the rule (UUID) or ad-hoc bucket holding each."""
        return dict(self._held)

    def slots_taken(self) -> dict[str, int]:
        """Slots taken per bucket (RATE_LIMIT rule UUID or ad-hoc reason)."""
        return dict(self._taken)

    def check(self, job: JobView) -> tuple[str, FilterRule | None]:
        """The :func:`verdict` for a job about to start, then its ad-hoc
        buckets: a RUN takes a slot of each bucket, a HOLD is remembered."""
        buckets = adhoc_buckets(job)
        rule: FilterRule | None = None
        if self.filtering:
            what, rule = verdict(self.rules, job, self._taken)
            if what == HOLD and rule is not None:
                self._held[job.id] = rule.uuid
            if what != RUN:
                return what, rule
            if rule is not None and rule.kind == RATE_LIMIT:
                buckets.insert(0, (rule.uuid, rule.limit))
        for key, limit in buckets:
            if self._taken.get(key, 0) >= limit:
                self._held[job.id] = key
                return HOLD, rule
        self._take(job.id, buckets)
        return RUN, rule

    def rejecting(self, job: JobView) -> FilterRule | None:
        """The REJECT rule that applies to ``job``, or None."""
        rule = applying(self.rules, job) if self.rejects else None
        return rule if rule is not None and rule.kind == REJECT else None

    def _take(self, job_id: int, buckets: list[tuple[str, int]]) -> None:
        if not buckets:
            return
        self._slots[job_id] = [key for key, _ in buckets]
        for key, limit in buckets:
            self._taken[key] = self._taken.get(key, 0) + 1
            if key not in self._by_uuid:
                self._adhoc_limits[key] = limit

    def unhold(self, job_id: int) -> None:
        """``job_id`` goes back to the queue (it is checked again when taken)."""
        self._held.pop(job_id, None)

    def _limit(self, key: str) -> int:
        rule = self._by_uuid.get(key)
        return rule.limit if rule is not None else self._adhoc_limits.get(key, 0)

    def release(self, job_id: int,
                urgency: Callable[[int], Any] | None = None) -> list[int]:
        """``job_id`` ended (or waits for a dependency): its slots are free.
        Returns the held jobs to look at again: for each of its buckets, of
        the jobs held by it, as many as it has free slots, the first by
        ``urgency`` (a sort key of a job id; default: the id)."""
        self._held.pop(job_id, None)
        woken: list[int] = []
        for key in self._slots.pop(job_id, ()):
            left = self._taken.get(key, 1) - 1
            if left > 0:
                self._taken[key] = left
            else:
                self._taken.pop(key, None)
            free = self._limit(key) - left
            if left <= 0:
                self._adhoc_limits.pop(key, None)
            waiting = sorted((jid for jid, held_by in self._held.items() if held_by == key),
                             key=urgency)[:max(free, 0)]
            for jid in waiting:
                del self._held[jid]
            woken.extend(waiting)
        return woken

    def set_rules(self, rules: Iterable[FilterRule], running: Iterable[JobView]) -> list[int]:
        """Use ``rules`` from now on; ``running``: the jobs that have started
        and not ended.  Returns every held job (all are looked at again)."""
        self.rules = ordered(rules)
        self._by_uuid = {rule.uuid: rule for rule in self.rules}
        kinds = {rule.kind for rule in self.rules}
        self.filtering = bool(kinds & {PAUSE, REJECT, RATE_LIMIT})
        self.rejects = REJECT in kinds
        self._slots.clear()
        self._taken.clear()
        self._adhoc_limits.clear()
        for job in running:
            buckets = adhoc_buckets(job)
            rule = applying(self.rules, job) if self.rules else None
            if rule is not None and rule.kind == RATE_LIMIT:
                buckets.insert(0, (rule.uuid, rule.limit))
            self._take(job.id, buckets)
        waiting = list(self._held)
        self._held.clear()
        return waiting
